2026-11-27T21:55:57Z memnmt average --model runs/transformer --last 5 --out runs/transformer_avg5.keras
