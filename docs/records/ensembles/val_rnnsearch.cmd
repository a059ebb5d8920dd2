2026-11-27T23:07:44Z memnmt evaluate --model runs/rnnsearch --split val --beam 5 --quiet
