2026-11-27T19:27:07Z memnmt evaluate --model runs/luong_new --model runs/ylstm_same --beam 5 --quiet
