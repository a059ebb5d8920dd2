"""The ``memnmt`` command line.

The subcommands and flags are a contract (scripts rely on them): extend, never rename.
``memnmt --help`` lists only the subcommands that exist.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _quiet_tf() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _add_corpus_args(p: argparse.ArgumentParser, split_default: str = "train") -> None:
    p.add_argument("--data-dir", help="folder with Multi30k-style {split}.{lang}.gz files "
                   "(default: $MEMNMT_DATA, else the cache, else download)")
    p.add_argument("--src", help="source language, e.g. en")
    p.add_argument("--tgt", help="target language, e.g. de")
    p.add_argument("--split", default=split_default, help=f"split name (default: {split_default})")
    p.add_argument("--src-file", help="source text file (plain or .gz), instead of --data-dir")
    p.add_argument("--tgt-file", help="target text file, aligned line by line with --src-file")


def _load_corpus(args):
    from keras_memnmt.data import load_multi30k, read_parallel

    if args.src_file or args.tgt_file:
        if not (args.src_file and args.tgt_file):
            raise SystemExit("error: --src-file and --tgt-file must be given together")
        return read_parallel(args.src_file, args.tgt_file)
    if not (args.src and args.tgt):
        raise SystemExit("error: give --src and --tgt (with --data-dir or $MEMNMT_DATA), "
                         "or --src-file and --tgt-file")
    return load_multi30k(args.src, args.tgt, args.split, data_dir=args.data_dir)


def cmd_data_check(args) -> int:
    from keras_memnmt.data import SubwordVocab, corpus_stats

    corpus = _load_corpus(args)
    if args.vocab:
        vocab = SubwordVocab.load(args.vocab)
    else:
        # A quick vocabulary on (a sample of) this corpus, only to count subword tokens.
        n = min(len(corpus), 20000)
        vocab = SubwordVocab.train(corpus.source[:n], corpus.target[:n], size=args.vocab_size)
    stats = corpus_stats(corpus, vocab, args.max_length)
    report = {"corpus": corpus.name, **stats.summary(), "max_length": args.max_length}
    print(json.dumps(report, indent=2))
    return 0


def cmd_vocab_build(args) -> int:
    from keras_memnmt.data import SubwordVocab

    corpus = _load_corpus(args)
    t0 = time.perf_counter()
    vocab = SubwordVocab.train(corpus.source, corpus.target, size=args.size,
                               model_type=args.model_type, joint=args.joint)
    vocab.save(args.out)
    print(json.dumps({
        "out": args.out, "pairs": len(corpus), "dropped_empty": corpus.dropped_empty,
        "source_vocab_size": vocab.source.vocab_size,
        "target_vocab_size": vocab.target.vocab_size,
        "seconds": round(time.perf_counter() - t0, 2),
    }, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memnmt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    data = sub.add_parser("data", help="inspect corpora")
    data_sub = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    check = data_sub.add_parser("check", help="pair count, token counts, length percentiles, "
                                "dropped pairs; exits non-zero on any error")
    _add_corpus_args(check)
    check.add_argument("--vocab", help="vocabulary folder from `memnmt vocab build` "
                       "(default: a quick one trained on the corpus)")
    check.add_argument("--vocab-size", type=int, default=8000)
    check.add_argument("--max-length", type=int, default=80,
                       help="pairs longer than this many subword tokens count as dropped")
    check.set_defaults(func=cmd_data_check)

    vocab = sub.add_parser("vocab", help="subword vocabularies")
    vocab_sub = vocab.add_subparsers(dest="vocab_command", required=True, metavar="ACTION")
    build = vocab_sub.add_parser("build", help="train SentencePiece on a training split")
    _add_corpus_args(build)
    build.add_argument("--out", required=True, help="output folder")
    build.add_argument("--size", type=int, default=8000, help="vocabulary size (default 8000)")
    build.add_argument("--model-type", choices=("unigram", "bpe"), default="unigram")
    build.add_argument("--joint", action="store_true", help="one vocabulary for both sides")
    build.set_defaults(func=cmd_vocab_build)
    return parser


def main(argv: list[str] | None = None) -> int:
    _quiet_tf()
    args = build_parser().parse_args(argv)
    from keras_memnmt.data import CorpusError, DownloadError

    try:
        return args.func(args)
    except (CorpusError, DownloadError, FileNotFoundError, ValueError) as e:
        print(f"memnmt: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
