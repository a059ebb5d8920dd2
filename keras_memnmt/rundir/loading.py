"""Loading a run: its model, vocabulary and config, or several runs (or checkpoints) as one
:class:`~keras_memnmt.models.Ensemble`.

Loading a run needs the models and the data packages, never the training code.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import keras

from keras_memnmt.data import SubwordVocab
from keras_memnmt.rundir.checkpoints import CheckpointError, checkpoint_path, intact_alternatives, read_model_file
from keras_memnmt.rundir.layout import RUN_FILES, read_config
from keras_memnmt.rundir.records import run_model_file


def _broken(run_dir: str, error: CheckpointError, path: str) -> CheckpointError:
    others = intact_alternatives(run_dir, path)
    hint = (
        f"; intact: {', '.join(others)} (pass one with --checkpoint)"
        if others
        else "; the run holds no intact model file"
    )
    return CheckpointError(f"{error}{hint}")


def load_model(run_dir: str, checkpoint: str | None = None, warn=None) -> keras.Model:
    """The best (else the latest) model of a run directory; a clear error if there is none.

    ``checkpoint`` picks another model file instead: a name in ``run_dir/checkpoints``
    (``step3199``, with or without ``.keras``), a file of the run (``model.keras``), or a
    path to a ``.keras`` file.

    A truncated or corrupt file is a :class:`CheckpointError` naming it and the run's
    intact model files, except in the one case where the choice is plain: with no
    ``checkpoint``, a broken ``best.keras`` falls back to ``model.keras`` (the latest
    weights), and ``warn`` (default: stderr) says so.
    """
    if checkpoint is not None:
        path = checkpoint_path(run_dir, checkpoint)
        try:
            return read_model_file(path)
        except CheckpointError as e:
            raise _broken(run_dir, e, path) from None
    best, latest = os.path.join(run_dir, "best.keras"), os.path.join(run_dir, "model.keras")
    if os.path.isfile(best):
        try:
            return read_model_file(best)
        except CheckpointError as e:
            if not os.path.isfile(latest):
                raise _broken(run_dir, e, best) from None
            try:
                model = read_model_file(latest)
            except CheckpointError:
                raise _broken(run_dir, e, best) from None
            (warn or _stderr)(f"{e}; using {latest} (the latest weights) instead")
            return model
    if os.path.isfile(latest):
        try:
            return read_model_file(latest)
        except CheckpointError as e:
            raise _broken(run_dir, e, latest) from None
    raise FileNotFoundError(
        f"no best.keras or model.keras in {run_dir}: is it a finished `memnmt train` run directory?"
    )


def _stderr(message: str) -> None:
    print(f"memnmt: warning: {message}", file=sys.stderr, flush=True)


def load_run(run_dir: str, checkpoint: str | None = None):
    """``(model, vocab, config)`` of a run directory, with clear errors for missing pieces.

    ``checkpoint``: see :func:`load_model` (default: ``best.keras``).
    """
    _check_run_files(run_dir)
    config = read_config(run_dir)
    return load_model(run_dir, checkpoint), SubwordVocab.load(os.path.join(run_dir, "vocab")), config


def load_ensemble(members: Sequence[str | tuple[str, str | None]]):
    """``(model, vocab, config)`` of one or several runs: an :class:`Ensemble` of several.

    ``members``: run directories, or ``(run_dir, checkpoint)`` pairs (``checkpoint``: see
    :func:`load_model`; ``None`` = ``best.keras``); a run may appear more than once
    (several of its checkpoints). The vocabulary and config are the first member's: its
    source vocabulary encodes, its target vocabulary decodes. Every member's run must
    have the same source and target vocabularies (see :func:`check_same_vocab`): a
    difference is a ``ValueError`` naming both runs. One member gives that model itself.
    """
    from keras_memnmt.models import Ensemble

    pairs = [(m, None) if isinstance(m, str) else tuple(m) for m in members]
    if not pairs:
        raise ValueError("load_ensemble needs at least one run directory")
    first_run, _ = pairs[0]
    models, vocab, config = [], None, None
    for run_dir, checkpoint in pairs:
        if run_dir == first_run and vocab is not None:  # the same run again: only its model
            models.append(load_model(run_dir, checkpoint))
            continue
        model, own_vocab, own_config = load_run(run_dir, checkpoint)
        if vocab is None:
            vocab, config = own_vocab, own_config
        else:
            check_same_vocab(first_run, vocab, run_dir, own_vocab)
        models.append(model)
    if len(models) == 1:
        return models[0], vocab, config
    return Ensemble(models, name="ensemble"), vocab, config


def _check_run_files(run_dir: str) -> None:
    """A ``FileNotFoundError`` unless ``run_dir`` is a folder with a run's config and vocabulary."""
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"model directory not found: {run_dir}")
    missing = [p for p in RUN_FILES if not os.path.isfile(os.path.join(run_dir, p))]
    if missing:
        raise FileNotFoundError(f"incomplete model directory {run_dir}: missing {', '.join(missing)}")


def check_ensemble(members: Sequence[str | tuple[str, str | None]]) -> None:
    """What :func:`load_ensemble` would refuse in ``members``, found without loading a
    model (only the vocabularies are read): a run without its config or vocabulary, a
    checkpoint it does not hold, a run with no model file, and vocabularies that differ
    from the first member's."""
    pairs = [(m, None) if isinstance(m, str) else tuple(m) for m in members]
    vocabs: dict[str, SubwordVocab] = {}
    for run_dir, checkpoint in pairs:
        _check_run_files(run_dir)
        if checkpoint is not None:
            checkpoint_path(run_dir, checkpoint)
        else:
            run_model_file(run_dir)
        if run_dir not in vocabs:
            vocabs[run_dir] = SubwordVocab.load(os.path.join(run_dir, "vocab"))
            first = pairs[0][0]
            check_same_vocab(first, vocabs[first], run_dir, vocabs[run_dir])


def check_same_vocab(run_a: str, vocab_a: SubwordVocab, run_b: str, vocab_b: SubwordVocab) -> None:
    """A ``ValueError`` naming both runs unless they have the same source and target
    vocabularies: identical SentencePiece models, or the same pieces in the same order."""
    for side in ("target", "source"):
        a, b = getattr(vocab_a, side), getattr(vocab_b, side)
        if a.proto == b.proto:
            continue
        if a.vocab_size == b.vocab_size and all(a.id_to_piece(i) == b.id_to_piece(i) for i in range(a.vocab_size)):
            continue
        raise ValueError(
            f"{run_a} and {run_b} have different {side} vocabularies "
            f"({a.vocab_size} and {b.vocab_size} pieces, {side}.model in their vocab/ "
            "folders differ): an ensemble's members must share both vocabularies"
        )
