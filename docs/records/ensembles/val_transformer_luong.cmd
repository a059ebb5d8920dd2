2026-11-27T22:00:20Z memnmt evaluate --model runs/transformer --model runs/luong_new --split val --beam 5 --quiet
