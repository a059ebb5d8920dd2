2026-11-26T05:46:13Z memnmt average --model runs/luong --last 4 --out runs/luong/average_last4.keras
