"""``memnmt translate``: text through a run or an ensemble, a chunk at a time.
"""

from __future__ import annotations

import contextlib
import os
import sys

from keras_memnmt.cli.args import (
    ENSEMBLE_CHECKPOINT_HELP,
    MODEL_HELP,
    add_search_args,
    finite_float,
    int_at_least,
    members_of,
    model_files,
    positive_int,
    progress,
    read_stdin,
    search_options,
    write,
)


def _partial_output(path: str) -> tuple[int, int, int]:
    """``(complete lines, their bytes, all bytes)`` of a partly written ``--output`` that
    ``--resume`` continues; a file that is not UTF-8 text is refused. Reads only."""
    import codecs

    with open(path, "rb") as f:
        data = f.read()
    bad = data.find(b"\0")
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data)  # a character cut short at the end is fine
    except UnicodeDecodeError as e:
        bad = e.start if bad < 0 else min(bad, e.start)
    if bad >= 0:
        raise ValueError(f"--resume: {path} is not UTF-8 text (byte {bad}), so not a translation "
                         "to continue; nothing was changed")
    return data.count(b"\n"), data.rfind(b"\n") + 1, len(data)


PARTIAL = ".partial"  # OUTPUT's lines are written to OUTPUT.partial, moved to OUTPUT when whole


def cmd_translate(args) -> int:
    from keras_memnmt.evaluation.translation import check_search_inputs, translate_chunks
    from keras_memnmt.rundir.runs import load_ensemble

    search = search_options(args)  # bad options fail before the model is loaded
    search.update(_drawing(args))
    if args.constraints and (args.sampling or args.beam < 2):
        raise ValueError("--constraints needs beam search: --beam 2 or more" +
                         (", not --sampling" if args.sampling else f" (got --beam {args.beam})"))
    if args.alignments and args.show_attention:
        raise ValueError("--alignments and --show-attention: choose one (words on stdout, or subwords on stderr)")
    if args.resume and not args.output:
        raise ValueError("--resume continues an --output file; give --output")
    search.update(_lengths(args))
    n_best = _n_best(args)
    members = members_of(args)
    output = _Output(args, model_files(members))
    # The model first: a bad --model is reported before standard input is waited for.
    model, vocab, _ = load_ensemble(members)
    prefixes, constraints, lines = _read_inputs(args)
    # Every prefix and constraint line within its bounds before anything is translated or written.
    check_search_inputs(vocab, args.beam, prefixes, constraints)
    done = output.start(len(lines), quiet=args.quiet)
    out, name = output.stream, output.name
    try:
        # Chunk by chunk in input order (each sorted by length inside): a finished chunk
        # is written at once, so a long run's output grows as it goes and --resume can
        # continue it.
        number = done
        for chunk in translate_chunks(model, vocab, lines[done:], chunk_size=args.chunk_size,
                                      beam_size=args.beam, progress=progress(args), batch_size=args.batch_size,
                                      n_best=n_best, log_probs=bool(n_best),
                                      alignments=args.show_attention, word_alignment=args.alignments,
                                      line_offset=done,
                                      prefixes=None if prefixes is None else prefixes[done:],
                                      constraints=None if constraints is None else constraints[done:], **search):
            if n_best:
                write(out, "".join(_n_best_lines(number, chunk, args.n_best_format)), name)
                number += len(chunk)
                continue
            if args.samples > 1:  # each input line's samples, one per line
                chunk = [line for draws in chunk for line in draws]
            if args.alignments:  # Marian's and OpenNMT-py's layout
                chunk = [f"{line} ||| {links}" for line, links in chunk]
            if not args.show_attention:
                write(out, "".join(line + "\n" for line in chunk), name)
                continue
            for line, alignment in chunk:  # the line as always; its alignment on stderr
                number += 1
                write(out, line + "\n", name)
                _print_alignment(number, alignment)
    except BaseException:
        output.fail()
        raise
    output.finish()
    return 0


class _Output:
    """Where ``translate`` writes: standard output, or ``--output``. A regular file is
    written whole or not at all: its lines go to ``OUTPUT.partial`` as they come, moved to
    ``OUTPUT`` at the end, so a failed or stopped translation leaves ``OUTPUT`` as it was
    and ``--resume`` continues ``OUTPUT.partial`` (else an ``OUTPUT`` written in place). A
    device or a pipe (``/dev/stdout``, a FIFO) is written as the lines come."""

    def __init__(self, args, model_files: list[str]):
        self.path = args.output
        self.whole = bool(self.path) and (not os.path.exists(self.path) or os.path.isfile(self.path))
        self.writing = self.path + PARTIAL if self.whole else self.path
        self.name = f"--output {self.path}" if self.path else "<stdout>"
        self.stream = sys.stdout
        if self.path:
            from keras_memnmt.rundir.outputs import check_output

            inputs = [(f"the {flag} file", path) for flag, path in (("--input", args.input), ("--prefix", args.prefix),
                                                                     ("--constraints", args.constraints)) if path]
            inputs += [("a model file to translate with", f) for f in model_files]
            for path in dict.fromkeys((self.path, self.writing)):
                check_output("--output", path, inputs=inputs)
        self.continued = next((p for p in (self.writing, self.path) if args.resume and p and os.path.isfile(p)), None)
        self.partial = _partial_output(self.continued) if self.continued else None  # refusals before the model

    def start(self, lines: int, quiet: bool) -> int:
        """Opens the output for an input of ``lines`` lines; returns how many are done
        already (``--resume``: the complete lines kept; an unfinished last one goes)."""
        done = 0
        if self.partial:
            done, end, size = self.partial
            if done > lines:
                raise ValueError(f"--resume: {self.continued} has {done} lines, more than the input's "
                                 f"{lines}; nothing was changed")
            if self.continued != self.writing:  # the finished lines go on in OUTPUT.partial; OUTPUT is kept
                _copy_head(self.continued, self.writing, end)
            elif end < size:
                with open(self.writing, "r+b") as f:
                    f.truncate(end)
            if not quiet:
                print(f"resume: {self.continued} holds {done} of {lines} lines; translating the rest",
                      file=sys.stderr)
        if self.path:
            try:
                self.stream = open(self.writing, "a" if self.partial else "w", encoding="utf-8")
            except OSError as e:
                raise OSError(f"cannot write {self.writing}: {e.strerror or e}") from e
        return done

    def fail(self) -> None:
        """After an error: the file closed, and where the lines done are said."""
        if not self.path:
            return
        with contextlib.suppress(OSError):  # the error on its way is the one to report
            self.stream.close()
        if self.whole:
            print(f"memnmt translate: {self.path} is unchanged; the lines translated so far are in "
                  f"{self.writing} (--resume continues them)", file=sys.stderr)

    def finish(self) -> None:
        if not self.path:
            return
        try:
            self.stream.close()
            if self.whole:
                os.replace(self.writing, self.path)
        except OSError as e:
            raise OSError(f"cannot write {self.name}: {e.strerror or e}") from e


def _copy_head(source: str, target: str, size: int) -> None:
    """``target`` made of the first ``size`` bytes of ``source`` (left as it is)."""
    import shutil

    with open(source, "rb") as f, open(target, "wb") as out:
        remaining = size
        while remaining > 0:
            block = f.read(min(remaining, 1 << 20))
            if not block:
                break
            out.write(block)
            remaining -= len(block)
    shutil.copymode(source, target)


def _read_inputs(args) -> tuple[list[str] | None, list[str] | None, list[str]]:
    """``--prefix`` and ``--constraints`` lines (read before standard input is waited
    for), then the input lines; a per-line file must have one line per input line."""
    from keras_memnmt.data import read_lines

    prefixes = read_lines(args.prefix) if args.prefix else None
    constraints = read_lines(args.constraints) if args.constraints else None
    lines = read_lines(args.input) if args.input else read_stdin()
    for flag, path, given in (("--prefix", args.prefix, prefixes), ("--constraints", args.constraints, constraints)):
        if given is not None and len(given) != len(lines):
            raise ValueError(f"{flag} {path} has {len(given)} lines but the input has {len(lines)}: "
                             "one line (empty for none) per input line")
    return prefixes, constraints, lines


def _drawing(args) -> dict:
    """The search's sampling options from the flags (and ``args.beam`` resolved): none
    without ``--sampling``; ``--samples``, ``--temperature`` and ``--seed`` need it, and
    a ``--beam`` above 1 excludes it."""
    if args.sampling is None:
        for flag, value, default in (("--samples", args.samples, 1), ("--temperature", args.temperature, 1.0),
                                     ("--seed", args.seed, 0)):
            if value != default:
                raise ValueError(f"{flag} sets how --sampling draws; give --sampling (full, topk:K or topp:P)")
        args.beam = 5 if args.beam is None else args.beam
        return {}
    from keras_memnmt.decoding.common import parse_sampling

    try:
        parse_sampling(args.sampling)
    except ValueError as e:
        raise ValueError(f"--{e}") from None
    if args.beam not in (None, 1):
        raise ValueError(f"--sampling draws one token at a time; it does not combine with --beam {args.beam}")
    if not args.temperature > 0:
        raise ValueError(f"--temperature must be > 0, got {args.temperature}")
    if args.samples > 1 and (args.resume or args.show_attention or args.alignments):
        flag = "--resume" if args.resume else "--show-attention" if args.show_attention else "--alignments"
        raise ValueError(f"--samples {args.samples} writes several lines per input line; {flag} needs one")
    args.beam = 1
    return {"sampling": args.sampling, "temperature": args.temperature, "seed": args.seed,
            "samples": args.samples}


def _n_best(args) -> int | None:
    """``--n-best`` checked against the beam and the flags that write one line per input line."""
    if args.n_best is None:
        if args.n_best_format is not None:
            raise ValueError("--n-best-format sets how --n-best lists are written; give --n-best N")
        return None
    if args.n_best > args.beam:
        raise ValueError(f"--n-best {args.n_best} is more than --beam {args.beam}: a beam search keeps --beam "
                         "hypotheses" + (" (--sampling draws one)" if args.sampling else ""))
    for flag, given in (("--resume", args.resume), ("--show-attention", args.show_attention),
                        ("--alignments", args.alignments), ("--samples", args.samples > 1)):
        if given:
            raise ValueError(f"--n-best writes --n-best lines per input line; not with {flag}")
    return args.n_best


def _n_best_lines(first: int, chunk: list, kind: str | None) -> list[str]:
    """The n-best lists of input lines ``first``, ``first + 1``, ... (counted from 0), best
    first: Moses's and Marian's ``N ||| TRANSLATION ||| log_prob= LOGP ||| SCORE`` (the
    default), or one JSON object a line (``jsonl``). ``log_prob`` is the model's
    log-probability of the translation, eos included (``memnmt score``'s); ``score`` the
    length-normalized one the beam ranks by. A hypothesis the length bound cut before eos
    is marked (``unfinished= 1`` among the features; ``"finished": false``): its
    ``log_prob`` has no eos term."""
    import json

    lines = []
    for offset, hypotheses in enumerate(chunk):
        for rank, (text, score, log_prob, finished) in enumerate(hypotheses):
            if kind == "jsonl":
                lines.append(json.dumps({"line": first + offset, "rank": rank, "translation": text,
                                         "log_prob": round(log_prob, 4), "score": round(score, 4),
                                         "finished": finished}, ensure_ascii=False) + "\n")
            else:
                cut = "" if finished else " unfinished= 1"
                lines.append(f"{first + offset} ||| {text} ||| log_prob= {log_prob:.4f}{cut} ||| {score:.4f}\n")
    return lines


def _lengths(args) -> dict:
    """The output length bound from ``--max-length`` or ``--max-length-a``/``-b``."""
    if args.max_length is not None:
        if args.max_length_a is not None or args.max_length_b is not None:
            raise ValueError("--max-length N bounds every output at N subwords; --max-length-a/-b bound it by "
                             "the source's length: give one or the other")
        return {"max_length_a": 0.0, "max_length_b": args.max_length}
    if args.max_length_a is not None and args.max_length_a < 0:
        raise ValueError(f"--max-length-a must be >= 0, got {args.max_length_a}")
    return {name: value for name, value in (("max_length_a", args.max_length_a),
                                            ("max_length_b", args.max_length_b)) if value is not None}


def _print_alignment(number: int, alignment: list) -> None:
    """``translate --show-attention``: each target subword of line ``number`` with the
    source subword it attends to most, and that weight, on stderr."""
    if not alignment:
        return
    width = max(len(target) for target, _, _ in alignment)
    rows = [f"  {target:<{width}}  <- {source}  {weight:.2f}" for target, source, weight in alignment]
    print(f"alignment {number}:", *rows, sep="\n", file=sys.stderr, flush=True)


def add_parsers(sub) -> None:
    """The ``translate`` command."""
    tl = sub.add_parser("translate", help="translate text with a trained run directory")
    tl.add_argument("--model", required=True, action="append", help=MODEL_HELP)
    tl.add_argument("--checkpoint", action="append", help=ENSEMBLE_CHECKPOINT_HELP)
    add_search_args(tl)
    tl.add_argument("--input", help="input file, one sentence per line (default: stdin)")
    tl.add_argument("--output", help="output file (default: stdout); written to OUTPUT.partial a chunk at a "
                    "time, in input order, as the translation goes, and moved to OUTPUT when it is whole "
                    "(a failed or stopped translation leaves OUTPUT as it was)")
    tl.add_argument("--resume", action="store_true",
                    help="continue a partly written OUTPUT.partial (or OUTPUT): keep its complete lines "
                         "and translate the input from the next line on")
    tl.add_argument("--chunk-size", type=positive_int, default=4096,
                    help="input lines translated (sorted by length) and written together (default 4096)")
    tl.add_argument("--quiet", action="store_true", help="no progress bar (drawn only on a terminal)")
    tl.add_argument("--show-attention", action="store_true",
                    help="after each translated line, print on stderr each target subword with the "
                         "source subword it attends to most and that weight (models with source "
                         "attention); the translations themselves are unchanged")
    tl.add_argument("--alignments", nargs="?", const="hard", choices=("hard", "soft"),
                    help="after each translation, ' ||| ' and its word alignment from the source attention: "
                         "Pharaoh pairs i-j (hard, the default) or each target word's weights over the "
                         "source words (soft); models with source attention")
    tl.add_argument("--prefix", help="target prefixes, one per input line (an empty line: none): each "
                    "translation starts with its line's prefix, and the search goes on from there")
    tl.add_argument("--constraints", help="target phrases each translation must contain, one line per input "
                    "line, phrases separated by tabs (an empty line: none); lexically constrained beam search "
                    "(dynamic beam allocation), --beam 2 or more and at most --beam phrases a line")
    tl.add_argument("--sampling", metavar="full|topk:K|topp:P",
                    help="draw each output token instead of searching: from the whole distribution, "
                         "the K most probable tokens, or the fewest whose probability reaches P "
                         "(greedy order; not with --beam above 1)")
    tl.add_argument("--temperature", type=finite_float, default=1.0,
                    help="with --sampling: divides the log-probabilities drawn from (default 1.0)")
    tl.add_argument("--seed", type=int_at_least(0), default=0,
                    help="with --sampling: the draws' seed; the same seed gives the same samples "
                         "on every backend and batch size (default 0)")
    tl.add_argument("--samples", type=positive_int, default=1,
                    help="with --sampling: draws per input line, written on consecutive lines (default 1)")
    tl.add_argument("--n-best", type=positive_int, metavar="N",
                    help="write the N best translations of each input line (N <= --beam), best first, one per "
                         "line: 'LINE ||| TRANSLATION ||| log_prob= LOGP ||| SCORE' (LINE counted from 0; LOGP the "
                         "model's log-probability, eos included, as memnmt score gives it; SCORE the "
                         "length-normalized one the beam ranks by)")
    tl.add_argument("--n-best-format", choices=("moses", "jsonl"),
                    help="with --n-best: moses (the line above, the default) or jsonl (one JSON object a "
                         "line: line, rank, translation, log_prob, score, finished)")
    tl.add_argument("--batch-size", type=positive_int, metavar="SENTENCES",
                    help="sentences per search (default: 256 greedy, 640 // --beam otherwise)")
    tl.add_argument("--max-length", type=positive_int, metavar="N",
                    help="at most N subwords per translation, eos included (instead of --max-length-a/-b)")
    tl.add_argument("--max-length-a", type=finite_float, metavar="A",
                    help="the length bound is A x source subwords + B (default A 1.5)")
    tl.add_argument("--max-length-b", type=positive_int, metavar="B", help="see --max-length-a (default B 10)")
    tl.set_defaults(func=cmd_translate, beam=None)
