"""Preparing a run directory for a training: an earlier run in it is refused, removed
(``--overwrite``) or continued (``--resume``, after :func:`check_resume` finds that the
new config keeps what the run was trained with); a warm-started run shares its
pre-trained run's vocabulary.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Sequence

from keras_memnmt.config import ConfigError, TrainConfig, build_model, resolved_corpus
from keras_memnmt.data.vocab import vocabulary_maker
from keras_memnmt.models import option_differences
from keras_memnmt.rundir.layout import TRAIN_COMMAND, WRITTEN_BY_TRAIN, read_config
from keras_memnmt.rundir.records import RECORD_FILE, is_record


def prepare_run_dir(
    out_dir: str, resume: bool, overwrite: bool, log=print, written: tuple[str, ...] = WRITTEN_BY_TRAIN
) -> None:
    """Refuses to train over an earlier run unless told to continue it or to start over.

    An earlier run is any of the files a training writes (``written``), a run killed
    before its first validation (``config.json`` and ``vocab/`` only) included: its
    vocabulary is reused with ``--resume`` only, after its config is checked. With
    ``overwrite``, removes the earlier run's files (``written``) and nothing else. A
    folder whose files of those names are not a run's (:func:`not_a_run`) is refused
    either way: nothing in it is removed, continued or written over; so is ``overwrite``
    of a ``vocab/`` that another command made (``memnmt vocab build``, as its
    ``vocab.json`` says: :func:`~keras_memnmt.data.vocab.vocabulary_maker`).
    """
    if resume and overwrite:
        raise ConfigError("resume and overwrite exclude each other")
    found = [n for n in written if os.path.lexists(os.path.join(out_dir, n))]
    if not found:
        return
    why = not_a_run(out_dir, found)
    if why:  # a user's files of those names: neither continued nor removed
        raise FileExistsError(
            f"{out_dir} is not a run ({why}) but holds {', '.join(found)}, names "
            "that a run writes; --resume and --overwrite take only a run; choose another --out"
        )
    if resume:
        return
    if not overwrite:
        trained = [n for n in ("model.keras", "best.keras", "validations.json") if n in found]
        what = "a trained run" if trained else "the start of a run"
        raise FileExistsError(
            f"{out_dir} already holds {what} ({', '.join(trained or found)}); pass "
            "--resume to continue it, --overwrite to start over, or another --out"
        )
    made_by = vocabulary_maker(os.path.join(out_dir, "vocab")) if "vocab" in found else None
    if made_by not in (None, TRAIN_COMMAND):  # a user's vocabulary: never removed
        raise FileExistsError(
            f"{os.path.join(out_dir, 'vocab')} is a vocabulary that `{made_by}` made, "
            "not a training: --overwrite removes only what a training made; move it "
            "elsewhere, or choose another --out"
        )
    remove_run_files(out_dir, written)
    log(f"overwrite: removed the earlier run in {out_dir}")


def remove_run_files(out_dir: str, names: Sequence[str] = WRITTEN_BY_TRAIN, keep: Sequence[str] = ()) -> None:
    """Removes each of ``names`` (files or folders) from ``out_dir``, but those in ``keep``."""
    for name in names:
        path = os.path.join(out_dir, name)
        if name in keep:
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)


def not_a_run(out_dir: str, found: Sequence[str]) -> str | None:
    """Why ``out_dir``, which holds ``found`` (names a training writes), is not a run that
    ``memnmt train`` made (``None`` when it is one). The files' content decides, never
    their names alone: the run's ``config.json`` reads as a run config, its ``record.json``
    (where present) is a run record and its ``vocab/`` (where it holds ``vocab.json``) a
    saved vocabulary. A run killed while its vocabulary was written, before its
    ``config.json``, holds ``vocab/`` alone, and is a run when that is a vocabulary, whole
    or cut short (SentencePiece models, ``vocab.json`` last; nothing else).
    """
    from keras_memnmt.data.vocab import is_saved_vocabulary, is_vocabulary_in_progress

    vocab = os.path.join(out_dir, "vocab")
    if "config.json" in found:
        try:
            read_config(out_dir)
        except (ConfigError, OSError) as e:
            return f"its config.json is no run's config: {e}"
    elif list(found) != ["vocab"]:
        return "it has no config.json"
    elif not is_vocabulary_in_progress(vocab):
        return "it has no config.json, and vocab/ holds no vocabulary that a run saved"
    if RECORD_FILE in found and not is_record(os.path.join(out_dir, RECORD_FILE)):
        return f"its {RECORD_FILE} is no run record"
    if "vocab" in found and os.path.lexists(os.path.join(vocab, "vocab.json")) and not is_saved_vocabulary(vocab):
        return "its vocab/vocab.json is not a saved vocabulary"
    return None


# The config fields a resumed run may change: when it stops, how often it validates, logs
# and keeps checkpoints, its divergence threshold, the learning-rate decay from the next
# validation on, the devices it runs on, and the test after training. Every other field is
# what the steps so far were trained with (the data and their order, the vocabulary, the
# batches, the seed, the validation set its BLEU is compared on, the run it started from)
# or what model.keras holds (the model, the optimizer, the loss, the compile settings),
# which a resume takes as saved.
RESUME_FIELDS = (
    "epochs",
    "max_steps",
    "patience",
    "validate_every",
    "log_every",
    "val_loss_sentences",
    "tensorboard_pictures",
    "keep_checkpoints",
    "max_loss",
    "lr_decay",
    "lr_patience",
    "min_lr",
    "distribution",
    "beam_size",
    "test_split",
    "test_limit",
    "test_prefix",
)


def check_resume(out_dir: str, config: TrainConfig) -> None:
    """A clear error, before anything is written, when ``config`` changes a field of the
    resumed run that must stay as it was: every field but :data:`RESUME_FIELDS`
    (``corpus="auto"`` matches what the run resolved it to), and the model's options,
    compared on both configs' models (built without weights) by their ``get_config()``.
    The error names each changed field with the run's value and the new one."""
    saved = read_config(out_dir)
    before, now = build_model(saved, 8, 8), build_model(config, 8, 8)
    if saved.model != config.model:
        changed = [f"model={saved.model!r} (now {config.model!r})"]
    else:  # the options that shape no weight too: the resumed model is model.keras as saved
        changed = option_differences(before, now)
        a, b = before.get_config(), now.get_config()
        changed += [
            f"{k}={a.get(k)!r} (now {b.get(k)!r})" for k in getattr(now, "free_options", ()) if a.get(k) != b.get(k)
        ]
    for f in dataclasses.fields(TrainConfig):
        name = f.name
        if name in RESUME_FIELDS or name in ("model", "model_options"):
            continue
        was, new = getattr(saved, name), getattr(config, name)
        if name == "corpus":  # the saved config holds the corpus it resolved to
            new = resolved_corpus(config)
        if was != new and not (name == "corpus" and "auto" in (was, new)):
            changed.append(f"{name}={was!r} (now {new!r})")
    if changed:
        raise ConfigError(
            f"cannot resume {out_dir}: it was trained with {', '.join(changed)}; "
            "pass its values with --set (a resume may change only "
            f"{', '.join(RESUME_FIELDS)})"
        )


def share_vocab(run_dir: str, out_dir: str) -> None:
    """A warm-started run uses its pre-trained run's vocabulary (copied into ``out_dir/vocab``)."""
    vocab_dir = os.path.join(out_dir, "vocab")
    if not os.path.isfile(os.path.join(vocab_dir, "vocab.json")):
        shutil.copytree(os.path.join(run_dir, "vocab"), vocab_dir, dirs_exist_ok=True)
