2026-11-29T14:04:27Z memnmt evaluate --model runs/transformer_tiny --checkpoint runs/transformer_tiny_8000_last10.keras --split val --beam 5 --quiet
