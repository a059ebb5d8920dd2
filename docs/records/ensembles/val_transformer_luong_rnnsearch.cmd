2026-11-27T23:07:58Z memnmt evaluate --model runs/transformer --model runs/luong_new --model runs/rnnsearch --split val --beam 5 --quiet
