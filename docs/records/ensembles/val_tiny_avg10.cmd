2026-11-29T13:52:19Z memnmt evaluate --model runs/transformer_tiny --checkpoint runs/transformer_tiny_8000_last10.keras --split val --beam 5 --quiet
