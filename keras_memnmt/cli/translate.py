"""``memnmt translate``: text through a run or an ensemble, a chunk at a time."""

from __future__ import annotations

import contextlib
import os
import sys

from keras_memnmt.cli.args import (
    ENSEMBLE_CHECKPOINT_HELP,
    MODEL_HELP,
    add_search_args,
    members_of,
    model_files,
    positive_int,
    progress,
    read_stdin,
    search_settings,
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
        raise ValueError(
            f"--resume: {path} is not UTF-8 text (byte {bad}), so not a translation to continue; nothing was changed"
        )
    return data.count(b"\n"), data.rfind(b"\n") + 1, len(data)


PARTIAL = ".partial"  # OUTPUT's lines are written to OUTPUT.partial, moved to OUTPUT when whole


def cmd_translate(args) -> int:
    from keras_memnmt.evaluation.translation import check_search_inputs, translate_chunks
    from keras_memnmt.rundir.loading import load_ensemble

    settings = _settings(args)  # bad options fail before the model is loaded
    n_best = _n_best(args, settings)
    members = members_of(args)
    output = _Output(args, model_files(members))
    # The model first: a bad --model is reported before standard input is waited for.
    model, vocab, _ = load_ensemble(members)
    prefixes, constraints, lines = _read_inputs(args)
    # Every prefix and constraint line within its bounds before anything is translated or written.
    check_search_inputs(vocab, settings.beam_size, prefixes, constraints)
    done = output.start(len(lines), quiet=args.quiet)
    out, name = output.stream, output.name
    try:
        # Chunk by chunk in input order (each sorted by length inside): a finished chunk
        # is written at once, so a long run's output grows as it goes and --resume can
        # continue it.
        number = done
        for chunk in translate_chunks(
            model,
            vocab,
            lines[done:],
            chunk_size=args.chunk_size,
            settings=settings,
            progress=progress(args),
            log_probs=bool(n_best),
            alignments=args.show_attention,
            word_alignment=args.alignments,
            line_offset=done,
            prefixes=None if prefixes is None else prefixes[done:],
            constraints=None if constraints is None else constraints[done:],
        ):
            if n_best:
                write(out, "".join(_n_best_lines(number, chunk, args.n_best_format)), name)
                number += len(chunk)
                continue
            if settings.samples > 1:  # each input line's samples, one per line
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

            inputs = [
                (f"the {flag} file", path)
                for flag, path in (
                    ("--input", args.input),
                    ("--prefix", args.prefix),
                    ("--constraints", args.constraints),
                )
                if path
            ]
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
                raise ValueError(
                    f"--resume: {self.continued} has {done} lines, more than the input's {lines}; nothing was changed"
                )
            if self.continued != self.writing:  # the finished lines go on in OUTPUT.partial; OUTPUT is kept
                _copy_head(self.continued, self.writing, end)
            elif end < size:
                with open(self.writing, "r+b") as f:
                    f.truncate(end)
            if not quiet:
                print(f"resume: {self.continued} holds {done} of {lines} lines; translating the rest", file=sys.stderr)
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
            print(
                f"memnmt translate: {self.path} is unchanged; the lines translated so far are in "
                f"{self.writing} (--resume continues them)",
                file=sys.stderr,
            )

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
            raise ValueError(
                f"{flag} {path} has {len(given)} lines but the input has {len(lines)}: "
                "one line (empty for none) per input line"
            )
    return prefixes, constraints, lines


def _settings(args):
    """The search of the flags, with the checks that concern translate's own flags: one
    line per input line for ``--resume`` and the alignments, a beam for ``--constraints``."""
    from keras_memnmt.decoding.settings import SettingError, flag_of

    settings = search_settings(args, "translate", run=args.model[0])  # an ensemble: its first member's recipe
    try:
        settings.for_inputs(constraints=bool(args.constraints))
    except SettingError as e:
        raise ValueError(e.render(flag_of)) from None
    if args.alignments and args.show_attention:
        raise ValueError("--alignments and --show-attention: choose one (words on stdout, or subwords on stderr)")
    if args.resume and not args.output:
        raise ValueError("--resume continues an --output file; give --output")
    aligned = "--show-attention" if args.show_attention else "--alignments" if args.alignments else None
    if settings.samples > 1 and (args.resume or aligned):
        raise ValueError(
            f"--samples {settings.samples} writes several lines per input line; "
            f"{'--resume' if args.resume else aligned} needs one"
        )
    mode = settings.mode_object()
    if aligned and (mode.picks or mode.rows(settings) > 1):
        raise ValueError(f"{aligned} shows the search's best translation: not with the {mode.name} mode")
    return settings


def _n_best(args, settings) -> int | None:
    """``--n-best`` checked against the flags that write one line per input line."""
    if settings.n_best is None:
        if args.n_best_format is not None:
            raise ValueError("--n-best-format sets how --n-best lists are written; give --n-best N")
        return None
    for flag, given in (
        ("--resume", args.resume),
        ("--show-attention", args.show_attention),
        ("--alignments", args.alignments),
    ):
        if given:
            raise ValueError(f"--n-best writes --n-best lines per input line; not with {flag}")
    return settings.n_best


def _n_best_lines(first: int, chunk: list, kind: str | None) -> list[str]:
    """The n-best lists of input lines ``first``, ``first + 1``, ... (counted from 0), best
    first: Moses's and Marian's ``N ||| TRANSLATION ||| log_prob= LOGP ||| SCORE`` (the
    default), or one JSON object a line (``jsonl``). ``log_prob`` is the model's
    log-probability of the translation, eos included (``memnmt score``'s); ``score`` the
    length-normalized one the beam ranks by (every hypothesis ends with eos: the search's
    length rule, docs/decoding.md; ``"finished"`` says it)."""
    import json

    lines = []
    for offset, hypotheses in enumerate(chunk):
        for rank, (text, score, log_prob, finished) in enumerate(hypotheses):
            if kind == "jsonl":
                lines.append(
                    json.dumps(
                        {
                            "line": first + offset,
                            "rank": rank,
                            "translation": text,
                            "log_prob": round(log_prob, 4),
                            "score": round(score, 4),
                            "finished": finished,
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
            else:
                lines.append(f"{first + offset} ||| {text} ||| log_prob= {log_prob:.4f} ||| {score:.4f}\n")
    return lines


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
    add_search_args(tl, "translate")
    tl.add_argument("--input", help="input file, one sentence per line (default: stdin)")
    tl.add_argument(
        "--output",
        help="output file (default: stdout); written to OUTPUT.partial a chunk at a "
        "time, in input order, as the translation goes, and moved to OUTPUT when it is whole "
        "(a failed or stopped translation leaves OUTPUT as it was)",
    )
    tl.add_argument(
        "--resume",
        action="store_true",
        help="continue a partly written OUTPUT.partial (or OUTPUT): keep its complete lines "
        "and translate the input from the next line on",
    )
    tl.add_argument(
        "--chunk-size",
        type=positive_int,
        default=4096,
        help="input lines translated (sorted by length) and written together (default 4096)",
    )
    tl.add_argument("--quiet", action="store_true", help="no progress bar (drawn only on a terminal)")
    tl.add_argument(
        "--show-attention",
        action="store_true",
        help="after each translated line, print on stderr each target subword with the "
        "source subword it attends to most and that weight (models with source "
        "attention); the translations themselves are unchanged",
    )
    tl.add_argument(
        "--alignments",
        nargs="?",
        const="hard",
        choices=("hard", "soft"),
        help="after each translation, ' ||| ' and its word alignment from the source attention: "
        "Pharaoh pairs i-j (hard, the default) or each target word's weights over the "
        "source words (soft); models with source attention",
    )
    tl.add_argument(
        "--prefix",
        help="target prefixes, one per input line (an empty line: none): each "
        "translation starts with its line's prefix, and the search goes on from there",
    )
    tl.add_argument(
        "--constraints",
        help="target phrases each translation must contain, one line per input "
        "line, phrases separated by tabs (an empty line: none); lexically constrained beam search "
        "(dynamic beam allocation), --beam 2 or more and at most --beam phrases a line",
    )
    tl.add_argument(
        "--n-best-format",
        choices=("moses", "jsonl"),
        help="with --n-best: moses, 'LINE ||| TRANSLATION ||| log_prob= LOGP ||| SCORE' (the default; "
        "LINE counted from 0, LOGP the model's log-probability, eos included, as memnmt score "
        "gives it, SCORE the length-normalized one the beam ranks by), or jsonl (one JSON object a "
        "line: line, rank, translation, log_prob, score, finished)",
    )
    tl.set_defaults(func=cmd_translate)
