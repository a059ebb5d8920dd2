2026-11-27T21:59:21Z memnmt evaluate --model runs/luong_new --split val --beam 5 --quiet
