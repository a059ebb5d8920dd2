2026-11-27T21:57:40Z memnmt evaluate --model runs/transformer --checkpoint runs/transformer_avg5.keras --model runs/luong_new --checkpoint best --beam 5 --quiet
