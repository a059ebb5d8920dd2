"""What every command shares: argument types, the search and corpus flags, help texts, JSON
and progress output, and reading the models, inputs and corpora that the flags name.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from keras_memnmt.tokens import MAX_INT  # the ground floor: no models loaded, parsing stays fast


def int_at_least(minimum: int, why: str = ""):
    """An argparse ``type``: an integer >= ``minimum`` (``why``: a reason shown with the bound)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}{why}, got {value}")
        if value > MAX_INT:  # as for config fields: TensorFlow's shapes hold 32 bits
            raise argparse.ArgumentTypeError(f"must be <= {MAX_INT}, got {value}")
        return value

    return parse


positive_int = int_at_least(1)


vocab_size_int = int_at_least(8, " (4 reserved ids plus pieces)")


def as_json(obj) -> str:
    """``obj`` as the CLI prints JSON: indented, non-ASCII characters as they are."""
    return json.dumps(obj, indent=2, ensure_ascii=False)


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no stream, or a closed one
        return False


def write(stream, text: str, name: str) -> None:
    """Writes and flushes ``text``; a failure (a full disk, ...) names ``name``. A closed
    pipe stays a ``BrokenPipeError`` (see ``main``)."""
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise OSError(f"cannot write {name}: {e.strerror or e}") from e


def read_stdin() -> list[str]:
    """Standard input's lines, decoded as UTF-8 line by line (errors name ``<stdin>`` and the line)."""
    from keras_memnmt.data.corpus import read_stream_lines

    if sys.stdin is None:
        raise ValueError("no --input given and standard input is closed")
    return read_stream_lines(getattr(sys.stdin, "buffer", sys.stdin), "<stdin>")


def add_corpus_args(p: argparse.ArgumentParser, split_default: str = "train") -> None:
    p.add_argument(
        "--data-dir",
        help="folder with Multi30k-style {split}.{lang}.gz files "
        "(default: $MEMNMT_DATA, else the cache, else download)",
    )
    p.add_argument("--src", help="source language, e.g. en")
    p.add_argument("--tgt", help="target language, e.g. de")
    p.add_argument("--split", default=split_default, help=f"split name (default: {split_default})")
    p.add_argument("--src-file", help="source text file (plain or .gz), instead of --data-dir")
    p.add_argument("--tgt-file", help="target text file, aligned line by line with --src-file")


def load_corpus(args):
    from keras_memnmt.data import load_multi30k, read_parallel

    if args.src_file or args.tgt_file:
        if not (args.src_file and args.tgt_file):
            raise ValueError("--src-file and --tgt-file must be given together")
        return read_parallel(args.src_file, args.tgt_file)
    if not (args.src and args.tgt):
        raise ValueError("give --src and --tgt (with --data-dir or $MEMNMT_DATA), or --src-file and --tgt-file")
    return load_multi30k(args.src, args.tgt, args.split, data_dir=args.data_dir)


def members_of(args) -> list[tuple[str, str | None]]:
    """``(run, checkpoint)`` of each model to translate with (more than one: an ensemble).

    The pairing of ``--model`` and ``--checkpoint``: no ``--checkpoint``, each run's
    best.keras; as many ``--checkpoint`` as ``--model``, paired in order; one ``--model``
    with several ``--checkpoint``, those checkpoints of that run.
    """
    runs, checkpoints = args.model, args.checkpoint or []
    if not checkpoints:
        return [(run, None) for run in runs]
    if len(checkpoints) == len(runs):
        return list(zip(runs, checkpoints))
    if len(runs) == 1:
        return [(runs[0], checkpoint) for checkpoint in checkpoints]
    raise ValueError(
        f"{len(runs)} --model and {len(checkpoints)} --checkpoint: give no --checkpoint, "
        "one per --model (in the same order; `best` names a run's best.keras), or "
        "several with a single --model"
    )


class EnsembleSpec(str):
    """The text of a ``compare --ensemble``, kept in order among the ``--system`` texts."""


def model_files(members: list[tuple[str, str | None]]) -> list[str]:
    """The model files that the ``--checkpoint`` of ``members`` name, where they exist (a
    run's own best.keras is a file of the run: no output may be it anyway)."""
    from keras_memnmt.rundir.checkpoints import checkpoint_path

    files = []
    for run, checkpoint in members:
        if checkpoint is not None:
            with contextlib.suppress(FileNotFoundError):  # loading it says what is missing
                files.append(checkpoint_path(run, checkpoint))
    return files


def progress(args) -> bool | None:
    """Progress bars: off with --quiet, else drawn when stderr is a terminal (None)."""
    return False if getattr(args, "quiet", False) else None


def add_search_args(parser, front: str = "evaluate", skip: tuple[str, ...] = ()) -> None:
    """The search flags of ``front`` (``translate``, ``evaluate``, ``export``), made from
    :class:`~keras_memnmt.decoding.settings.SearchSettings` with its help texts."""
    from keras_memnmt.decoding.settings import add_flags

    add_flags(parser, front, skip)


def search_settings(args, front: str = "evaluate", run: str | None = None, **fixed):
    """The :class:`~keras_memnmt.decoding.settings.SearchSettings` of the flags
    :func:`add_search_args` made; a bad value or combination is a one-line ``ValueError``
    naming the flags. Checked before any model is loaded.

    ``run``: the run translated with; without ``--length-penalty`` and ``--alpha``, its
    recipe's (``TrainConfig.length_penalty`` and ``alpha``, the final test's) are the search's.
    """
    from keras_memnmt.decoding.settings import from_flags

    return from_flags(args, front, **{**run_length_penalty(args, run), **fixed})


def run_length_penalty(args, run: str | None) -> dict:
    """``{"length_penalty", "alpha"}`` of ``run``'s config when the command line gives
    neither flag and ``run`` is a run directory with a config; else ``{}``."""
    from keras_memnmt.config import ConfigError
    from keras_memnmt.rundir.layout import read_config

    if run is None or getattr(args, "search_length_penalty", None) is not None:
        return {}
    if getattr(args, "search_alpha", None) is not None:
        return {}
    try:
        config = read_config(run)
    except (OSError, ConfigError):  # not a run directory: loading the model says what is wrong
        return {}
    return {"length_penalty": config.length_penalty, "alpha": config.alpha}


def search_options(args, run: str | None = None) -> tuple[int, dict]:
    """``(beam size, {"length_penalty", "alpha"})`` of the ``evaluate`` search flags (and
    ``run``'s recipe, :func:`search_settings`): what a stored translation of a run is kept
    under (``rundir.records.hypotheses_key``)."""
    settings = search_settings(args, "evaluate", run)
    return settings.beam_size, {"length_penalty": settings.length_penalty, "alpha": settings.alpha}


CHECKPOINT_HELP = (
    "another model file of the run instead of best.keras: a name in "
    "MODEL/checkpoints (e.g. step3199) or a path to a .keras file"
)


ENSEMBLE_CHECKPOINT_HELP = (
    CHECKPOINT_HELP + ". Repeatable: with several --model, give none (each run's "
    "best.keras) or one per --model, paired in order (`best` names a run's "
    "best.keras); with one --model, several --checkpoint translate with an "
    "ensemble of those checkpoints of that run"
)


SPLIT_HELP = (
    "Multi30k split (default test_2016_flickr), or `all`: every test split the loader "
    "knows, skipping with a note those whose files are not available (a synthetic run "
    "has its own test set; a run trained with test_prefix is tested on its files)"
)


MODEL_HELP = (
    "run directory written by `memnmt train`. Repeat it (--model A --model B) to translate "
    "with an ensemble: at every step the models' log-probabilities are averaged and "
    "renormalized. The runs must have the same source and target vocabularies (the "
    "first run's encode and decode)"
)
