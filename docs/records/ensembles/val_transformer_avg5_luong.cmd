2026-11-27T22:01:14Z memnmt evaluate --model runs/transformer --checkpoint runs/transformer_avg5.keras --model runs/luong_new --checkpoint best --split val --beam 5 --quiet
