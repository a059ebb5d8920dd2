2026-11-27T21:58:36Z memnmt evaluate --model runs/transformer --split val --beam 5 --quiet
