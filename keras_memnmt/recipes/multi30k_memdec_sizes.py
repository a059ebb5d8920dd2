"""The memory-size study of the MemDec paper (Table 2): one MemDec run per n in SIZES,
then a results table in OUT/results.md. RNNsearch is pre-trained once, in
OUT/pretrain_rnnsearch, and every run warm-starts from it; pass --set
pretrain_run=RUN_DIR to warm-start every run from an existing RNNsearch run instead.

    memnmt train multi30k_memdec_sizes --data-dir $MEMNMT_DATA --out runs/memdec_sizes
"""

from __future__ import annotations

import os

from keras_memnmt.config import TrainConfig
from keras_memnmt.recipes.multi30k_memdec import CONFIG, OPTIONS, Options, pretrain_stage  # noqa: F401
from keras_memnmt.training import train

SIZES = (4, 6, 8, 10, 12)  # paper Table 2


def run(
    config: TrainConfig,
    out_dir: str,
    options: Options = OPTIONS,
    data_dir: str | None = None,
    log=print,
    resume: bool = False,
    overwrite: bool = False,
) -> str:
    """One run per memory size into ``OUT/memory_size=N``; returns the results table (markdown)."""
    common = dict(data_dir=data_dir, log=log, resume=resume, overwrite=overwrite)
    if config.pretrain_run is None and options.pretrain_epochs:
        # memory_size shapes no weight of the RNNsearch stage: one stage serves every run.
        config = config.replace(pretrain_run=pretrain_stage(config, options, out_dir, **common))
    rows = []
    for n in SIZES:
        run_dir = os.path.join(out_dir, f"memory_size={n}")
        log(f"study: memory_size={n} -> {run_dir}")
        rows.append((n, train(config.replace(memory_size=n), run_dir, **common)))
    table = ["| memory_size | BLEU | lowercased BLEU | best val BLEU | train min |", "|---|---|---|---|---|"]
    table += [
        f"| {n} | {r['bleu']:.2f} | {r['bleu_lowercase']:.2f} | {r['best_val_bleu']:.2f} | "
        f"{r['train_seconds'] / 60:.1f} |"
        for n, r in rows
    ]
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(table) + "\n")
    return "\n".join(table)
