2026-11-27T21:59:35Z memnmt evaluate --model runs/transformer --checkpoint runs/transformer_avg5.keras --split val --beam 5 --quiet
