2026-11-29T13:52:36Z memnmt evaluate --model runs/transformer_tiny_s1 --checkpoint runs/transformer_tiny_s1_last10.keras --split val --beam 5 --quiet
