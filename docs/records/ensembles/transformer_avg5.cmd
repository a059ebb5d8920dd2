2026-11-27T21:56:10Z memnmt evaluate --model runs/transformer --checkpoint runs/transformer_avg5.keras --beam 5 --quiet
