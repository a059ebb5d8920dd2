"""What a resumed run forgets of its logs: the rows of ``log.csv`` and the TensorBoard
events written after the step it resumes from.

A run resumes from its ``model.keras`` (saved at its last validation), so whatever was
logged after that step belongs to training that the resume does again: the epochs from
the one the resume starts in (their ``log.csv`` rows and ``epoch_*`` scalars, x axis the
epoch, which Keras writes at the epoch's end) and the per-step summaries after it. Left
in place they would be there twice (a run cut by ``max_steps`` mid-epoch and resumed
had its last epoch twice in both). TensorBoard's event files can only be appended to,
so the files are written again without those events (whole: :func:`keras_memnmt.files.replacing`).
"""

from __future__ import annotations

import csv
import io
import os

from keras_memnmt.files import replacing

EPOCH_PREFIX = "epoch_"  # Keras's TensorBoard callback: the tags of the epoch-end scalars


def forget_log_rows(path: str, first_epoch: int) -> int:
    """Removes the rows of ``log.csv`` (Keras's ``CSVLogger``: column ``epoch``, from 0)
    for epochs ``first_epoch`` and later; returns how many went. A missing file is left."""
    if not os.path.isfile(path):
        return 0
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or "epoch" not in rows[0]:
        return 0
    column = rows[0].index("epoch")
    kept = [rows[0]] + [r for r in rows[1:] if not (r and _int(r[column]) >= first_epoch)]
    if len(kept) == len(rows):
        return 0
    with replacing(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows(kept)
    return len(rows) - len(kept)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1


def forget_events(folder: str, first_epoch: int, last_step: int) -> int:
    """Rewrites the TensorBoard event files directly in ``folder`` without the values of
    ``epoch_*`` tags at epochs ``first_epoch`` and later, nor those of other tags at steps
    after ``last_step``; returns how many values went. Files with none are left as they
    are."""
    if not os.path.isdir(folder):
        return 0
    import tensorflow as tf
    from tensorboard.compat.proto import event_pb2

    removed = 0
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not (name.startswith("events.out.tfevents.") and os.path.isfile(path)):
            continue
        records, dropped = [], 0
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
            event = event_pb2.Event.FromString(record)
            if event.HasField("summary"):
                keep = [
                    v
                    for v in event.summary.value
                    if (event.step < first_epoch if v.tag.startswith(EPOCH_PREFIX) else event.step <= last_step)
                ]
                if len(keep) < len(event.summary.value):
                    dropped += len(event.summary.value) - len(keep)
                    if not keep:
                        continue
                    del event.summary.value[:]
                    event.summary.value.extend(keep)
                    record = event.SerializeToString()
            records.append(record)
        if dropped:
            with replacing(path) as tmp:
                with tf.io.TFRecordWriter(tmp) as writer:
                    for record in records:
                        writer.write(record)
            removed += dropped
    return removed


def forget_after(run_dir: str, step: int, per_epoch: int) -> None:
    """What a run resumed at ``step`` trains again, forgotten: the ``log.csv`` rows and
    ``epoch_*`` scalars of the epoch that ``step`` lies in and later ones, and the
    per-step TensorBoard values after ``step``."""
    first_epoch = step // per_epoch
    forget_log_rows(os.path.join(run_dir, "log.csv"), first_epoch)
    for folder in ("train", "validation"):
        forget_events(os.path.join(run_dir, "tensorboard", folder), first_epoch, step)
