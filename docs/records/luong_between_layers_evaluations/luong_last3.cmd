2026-11-27T19:27:51Z memnmt evaluate --model runs/luong_new --checkpoint step8298 --checkpoint step8759 --checkpoint step9220 --beam 5 --quiet
