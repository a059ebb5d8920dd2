"""Test sets and the one way a run's translations of a split are made and kept.

:func:`available_test_sets` gives the test splits that ``--split`` names for a run
(Multi30k's, or a synthetic run's own test set). :func:`translate_split` translates one
with a run's model or an ensemble; ``memnmt evaluate``, ``memnmt compare`` and the end of
``memnmt train`` all go through it, so one rule decides when translations are reused and
stored (:mod:`keras_memnmt.rundir.records`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from keras_memnmt.data import CorpusError, DownloadError, ParallelCorpus
from keras_memnmt.data.multi30k import SPLITS
from keras_memnmt.evaluation.translation import score, translate
from keras_memnmt.rundir import records
from keras_memnmt.rundir.loading import load_ensemble

TEST_SPLITS = tuple(s for s in SPLITS if s.startswith("test"))
SYNTHETIC_SPLIT = "synthetic-test"
DEFAULT_TEST_SPLIT = "test_2016_flickr"  # `memnmt evaluate` and `compare` without --split
# The --split values that name a synthetic run's one test set.
SYNTHETIC_SPLIT_NAMES = (DEFAULT_TEST_SPLIT, "all", "test", SYNTHETIC_SPLIT)


def run_test_split(config) -> str:
    """The name of the test set a run is scored on after training: its ``test_prefix``'s
    file name, ``synthetic-test`` for a synthetic run, else its Multi30k ``test_split``."""
    if config.test_prefix:
        return os.path.basename(config.test_prefix.rstrip("/\\")) or config.test_prefix
    return SYNTHETIC_SPLIT if config.corpus == "synthetic" else config.test_split


def test_splits(config, split: str) -> list[str]:
    """The splits that ``split`` (``--split``) names for a run: ``all`` is every Multi30k
    test split the loader knows, any other name one Multi30k split. A synthetic run has
    one test set, ``synthetic-test``: ``split`` must be ``all``, ``test``,
    ``synthetic-test`` or the commands' default (``DEFAULT_TEST_SPLIT``). A run with its
    own test files (``test_prefix``) is tested on them for those names and the prefix's
    file name; a Multi30k run's other Multi30k splits stay available. Any other name is a
    ``ValueError`` naming ``--split``."""
    if config.test_prefix:
        own = run_test_split(config)
        if split in (DEFAULT_TEST_SPLIT, "all", "test", own):
            return [own]
        if config.corpus != "multi30k" or split not in SPLITS:
            raise ValueError(
                f"--split {split!r}: this run's test set is its own files, {own!r} "
                f"({config.test_prefix}); give --split test or {own}, or leave the default"
            )
        return [split]
    if config.corpus == "synthetic":
        if split not in SYNTHETIC_SPLIT_NAMES:
            raise ValueError(
                f"--split {split!r}: a synthetic run has one test set, {SYNTHETIC_SPLIT!r} "
                "(give --split test or all, or leave the default)"
            )
        return [SYNTHETIC_SPLIT]
    if split == "all":
        return list(TEST_SPLITS)
    if split not in SPLITS:
        raise ValueError(f"--split {split!r}: not a Multi30k split; expected one of {', '.join(SPLITS)} or all")
    return [split]


def load_test_set(config, split: str, data_dir: str | None = None) -> tuple[ParallelCorpus, str, str]:
    """``(corpus, split, name)`` of a run's test split: Multi30k ``split`` in the run's
    language pair, a synthetic run's own test set (drawn again from its seed), or the
    run's own test files (``test_prefix``, read from the folder the command runs in)."""
    if config.test_prefix and split == run_test_split(config):
        from keras_memnmt.data import read_prefix

        corpus = read_prefix(config.test_prefix, config.src, config.tgt)
        return corpus, split, f"{config.test_prefix} {config.src}->{config.tgt}"
    if config.corpus == "synthetic":
        from keras_memnmt.data import synthetic_splits

        return synthetic_splits(config.synthetic_size, seed=config.seed)[2], SYNTHETIC_SPLIT, "synthetic"
    from keras_memnmt.data import load_multi30k

    corpus = load_multi30k(config.src, config.tgt, split, data_dir=data_dir)
    return corpus, split, f"multi30k {config.src}->{config.tgt} {split}"


def available_test_sets(config, split: str, data_dir: str | None = None, note: Callable[[str], None] | None = None):
    """``(sets, skipped)``: the ``(corpus, split, name)`` of each split ``split`` names
    (see :func:`test_splits`), and ``{"split", "reason"}`` for each that ``split="all"``
    skips because its files are not available (a note for each through ``note``). A
    single named split that is not available is an error."""
    sets, skipped = [], []
    for name in test_splits(config, split):
        try:
            sets.append(load_test_set(config, name, data_dir))
        except (CorpusError, DownloadError) as e:
            if split != "all":
                raise
            reason = str(e).splitlines()[0]
            skipped.append({"split": name, "reason": reason})
            if note:
                note(f"skipping {name}: {reason}")
    if not sets:
        raise CorpusError(f"no test split is available ({'; '.join(s['reason'] for s in skipped)})")
    return sets, skipped


def ensemble_label(members: Sequence[tuple[str, str | None]]) -> str:
    """``RUN[:CHECKPOINT]+RUN[:CHECKPOINT]...``: the name of an ensemble's translations."""
    return "+".join(run if checkpoint is None else f"{run}:{checkpoint}" for run, checkpoint in members)


def translate_split(
    members: Sequence[tuple[str, str | None]],
    test: ParallelCorpus,
    split: str,
    beam_size: int = 5,
    length_penalty: str = "gnmt",
    alpha: float = 0.6,
    limit: int | None = None,
    corpus_name: str | None = None,
    store: bool = True,
    reuse: bool = True,
    models: dict | None = None,
    progress: bool | None = False,
) -> dict:
    """The translations of ``test`` (its first ``limit`` pairs) by ``members``, the
    ``(run, checkpoint)`` of one model or of an ensemble (``checkpoint`` None: the run's
    best.keras): ``{"run", "hypotheses", "references", "file", "reused", "scores"}``.

    The rule: the translations of a single run's own model (checkpoint None or ``best``)
    belong to the run. Those stored in its record for the same split, search settings,
    model file and references are given back (``reuse``; ``reused`` is then True and
    ``file`` their path); new ones of the whole split are stored in the run with their
    scores (``store``; ``scores`` is then sacreBLEU's, else None). A run without a model
    file (an archive) gives only what it stored. The translations of an ensemble or of
    another checkpoint belong to no one run: they are made every time and stored nowhere
    (``file`` None). ``models``: a dict that keeps the loaded models (under
    :func:`ensemble_label`) between calls.
    """
    members = list(members)
    label = ensemble_label(members)
    references = list(test.target)
    wanted = test.take(limit)
    own = len(members) == 1 and members[0][1] in (None, "best")
    run_dir = members[0][0]
    out = {"run": label, "references": list(wanted.target), "file": None, "reused": False, "scores": None}
    if own and reuse:
        found = records.stored_hypotheses(run_dir, split, beam_size, references, length_penalty, alpha, limit)
        if found is not None:
            hyps, entry = found
            return {**out, "hypotheses": hyps, "file": records.hypotheses_path(run_dir, entry), "reused": True}
    if own and label not in (models or {}):
        try:
            records.run_model_file(run_dir)
        except FileNotFoundError:  # an archive: it can only give what it stored
            held = sorted((records.read_record(run_dir) or {}).get("evaluations") or {})
            key = records.hypotheses_key(split, beam_size, length_penalty, alpha, limit)
            raise FileNotFoundError(
                f"{run_dir} holds no model file ({' or '.join(records.MODEL_FILES)}) to translate "
                f"with, and no stored translations for {key}; it holds: {', '.join(held) or 'none'}"
            ) from None
    models = {} if models is None else models
    if label not in models:
        model, vocab, _ = load_ensemble(members)
        models[label] = (model, vocab)
    model, vocab = models[label]
    hyps = translate(
        model, vocab, wanted.source, beam_size=beam_size, progress=progress, length_penalty=length_penalty, alpha=alpha
    )
    out["hypotheses"] = hyps
    if own and store and not limit:
        out["scores"] = score(hyps, wanted.target)
        try:
            entry = records.store_evaluation(
                run_dir, split, hyps, wanted.target, out["scores"], beam_size, length_penalty, alpha, corpus=corpus_name
            )
            out["file"] = os.path.join(run_dir, entry["hypotheses"])
        except OSError as e:  # a run directory we may not write to: the translations all the same
            print(f"warning: could not store the translations in {run_dir}: {e}", file=sys.stderr)
    return out
