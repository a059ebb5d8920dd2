2026-11-27T21:56:52Z memnmt evaluate --model runs/transformer --model runs/luong_new --beam 5 --quiet
