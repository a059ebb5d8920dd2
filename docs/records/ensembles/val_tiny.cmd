2026-11-29T13:51:47Z memnmt evaluate --model runs/transformer_tiny --checkpoint best --split val --beam 5 --quiet
