2026-11-29T13:52:52Z memnmt evaluate --model runs/transformer_tiny --checkpoint best --model runs/transformer_tiny_s1 --checkpoint best --split val --beam 5 --quiet
