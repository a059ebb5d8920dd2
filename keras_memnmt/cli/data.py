"""``memnmt data check`` and ``memnmt vocab build``: corpora and subword vocabularies."""

from __future__ import annotations

import os
import time

from keras_memnmt.cli.args import (
    add_corpus_args,
    as_json,
    load_corpus,
    positive_int,
    progress,
    vocab_size_int,
)


def _train_vocab(flag: str, source: list[str], target: list[str], size: int, **options):
    """``SubwordVocab.train``, its refusals (a size below what the corpus's characters
    need) naming ``flag``."""
    from keras_memnmt.data import SubwordVocab

    try:
        return SubwordVocab.train(source, target, size=size, **options)
    except ValueError as e:
        raise ValueError(f"{flag}: {e}") from e


def cmd_data_check(args) -> int:
    from keras_memnmt.data import SubwordVocab, corpus_stats

    corpus = load_corpus(args)
    if args.vocab:
        vocab = SubwordVocab.load(args.vocab)
    else:
        # A quick vocabulary on (a sample of) this corpus, only to count subword tokens.
        n = min(len(corpus), 20000)
        vocab = _train_vocab("--vocab-size", corpus.source[:n], corpus.target[:n], args.vocab_size)
    stats = corpus_stats(corpus, vocab, args.max_length)
    report = {"corpus": corpus.name, **stats.summary(), "max_length": args.max_length}
    print(as_json(report))
    return 0


def cmd_vocab_build(args) -> int:
    from keras_memnmt.data.vocab import VOCAB_NAMES, is_saved_vocabulary
    from keras_memnmt.rundir.outputs import check_output

    check_output("--out", args.out, directory=True, make_parents=True)
    held = [n for n in VOCAB_NAMES if os.path.lexists(os.path.join(args.out, n))]
    if held and not is_saved_vocabulary(args.out):  # an earlier vocabulary is replaced, a user's files never
        raise ValueError(
            f"--out {args.out}: holds {held[0]}, which is not part of a vocabulary that "
            "`memnmt vocab build` saved; choose another --out"
        )
    corpus = load_corpus(args)
    t0 = time.perf_counter()
    vocab = _train_vocab(
        "--size",
        corpus.source,
        corpus.target,
        args.size,
        model_type=args.model_type,
        joint=args.joint,
        progress=progress(args),
    )
    vocab.save(args.out, made_by="memnmt vocab build")
    print(
        as_json(
            {
                "out": args.out,
                "pairs": len(corpus),
                "dropped_empty": corpus.dropped_empty,
                "source_vocab_size": vocab.source.vocab_size,
                "target_vocab_size": vocab.target.vocab_size,
                "seconds": round(time.perf_counter() - t0, 2),
            }
        )
    )
    return 0


def add_parsers(sub) -> None:
    """The ``data`` and ``vocab`` commands."""
    data = sub.add_parser("data", help="inspect corpora")
    data_sub = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    check = data_sub.add_parser(
        "check", help="pair count, token counts, length percentiles, dropped pairs; exits non-zero on any error"
    )
    add_corpus_args(check)
    check.add_argument(
        "--vocab", help="vocabulary folder from `memnmt vocab build` (default: a quick one trained on the corpus)"
    )
    check.add_argument("--vocab-size", type=vocab_size_int, default=8000)
    check.add_argument(
        "--max-length",
        type=positive_int,
        default=80,
        help="pairs longer than this many subword tokens count as dropped",
    )
    check.set_defaults(func=cmd_data_check)

    vocab = sub.add_parser("vocab", help="subword vocabularies")
    vocab_sub = vocab.add_subparsers(dest="vocab_command", required=True, metavar="ACTION")
    build = vocab_sub.add_parser("build", help="train SentencePiece on a training split")
    add_corpus_args(build)
    build.add_argument("--out", required=True, help="output folder")
    build.add_argument("--size", type=vocab_size_int, default=8000, help="vocabulary size (default 8000)")
    build.add_argument("--model-type", choices=("unigram", "bpe"), default="unigram")
    build.add_argument("--joint", action="store_true", help="one vocabulary for both sides")
    build.add_argument("--quiet", action="store_true", help="no progress bar (drawn only on a terminal)")
    build.set_defaults(func=cmd_vocab_build)
