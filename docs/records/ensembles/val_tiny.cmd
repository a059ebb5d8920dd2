2026-11-29T14:04:15Z memnmt evaluate --model runs/transformer_tiny --checkpoint best --split val --beam 5 --quiet
