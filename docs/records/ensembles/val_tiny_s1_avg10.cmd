2026-11-29T14:04:44Z memnmt evaluate --model runs/transformer_tiny_s1 --checkpoint runs/transformer_tiny_s1_last10.keras --split val --beam 5 --quiet
