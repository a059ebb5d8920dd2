2026-11-27T23:09:48Z memnmt evaluate --model runs/transformer --checkpoint runs/transformer_avg5.keras --model runs/rnnsearch --checkpoint best --split val --beam 5 --quiet
