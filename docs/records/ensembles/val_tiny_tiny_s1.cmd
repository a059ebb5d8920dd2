2026-11-29T14:05:01Z memnmt evaluate --model runs/transformer_tiny --checkpoint best --model runs/transformer_tiny_s1 --checkpoint best --split val --beam 5 --quiet
