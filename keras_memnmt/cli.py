"""The ``memnmt`` command line.

The subcommands and flags are a contract (scripts rely on them): extend, never rename.
``memnmt --help`` lists only the subcommands that exist.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys
import time


def _setup_process() -> None:
    """Process-wide settings for the `memnmt` command's own process (``console_main``).

    Never applied by :func:`main` itself: a program (or pytest) that calls ``main``
    from Python keeps its own allocator settings (``tune_malloc`` stops glibc from ever
    shrinking the heap, which suits one training process, not a long-lived caller).
    """
    # Translations and JSON are UTF-8 whatever the locale (a C locale would refuse "ü").
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):  # no stream, or not a text stream
            stream.reconfigure(encoding="utf-8", errors=stream.errors)
    from keras_memnmt.runtime import quiet_tensorflow_startup, tune_malloc

    quiet_tensorflow_startup()  # before TensorFlow is imported; see its docstring
    tune_malloc()  # before the backends allocate; see its docstring


# keras_memnmt.config.MAX_INT, here without importing the models (parsing stays fast).
MAX_INT = 2**31 - 1


def _int_at_least(minimum: int, why: str = ""):
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


_positive_int = _int_at_least(1)
_vocab_size = _int_at_least(8, " (4 reserved ids plus pieces)")


def _finite_float(text: str) -> float:
    """An argparse ``type``: a finite float (no nan, no inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _json(obj) -> str:
    """``obj`` as the CLI prints JSON: indented, non-ASCII characters as they are."""
    return json.dumps(obj, indent=2, ensure_ascii=False)


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no stream, or a closed one
        return False


def _write(stream, text: str, name: str) -> None:
    """Writes and flushes ``text``; a failure (a full disk, ...) names ``name``. A closed
    pipe stays a ``BrokenPipeError`` (see ``main``)."""
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise OSError(f"cannot write {name}: {e.strerror or e}") from e


def _read_stdin() -> list[str]:
    """Standard input's lines, decoded as UTF-8 line by line (errors name ``<stdin>`` and the line)."""
    from keras_memnmt.data.corpus import read_stream_lines

    if sys.stdin is None:
        raise ValueError("no --input given and standard input is closed")
    return read_stream_lines(getattr(sys.stdin, "buffer", sys.stdin), "<stdin>")


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
            raise ValueError("--src-file and --tgt-file must be given together")
        return read_parallel(args.src_file, args.tgt_file)
    if not (args.src and args.tgt):
        raise ValueError("give --src and --tgt (with --data-dir or $MEMNMT_DATA), "
                         "or --src-file and --tgt-file")
    return load_multi30k(args.src, args.tgt, args.split, data_dir=args.data_dir)


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

    corpus = _load_corpus(args)
    if args.vocab:
        vocab = SubwordVocab.load(args.vocab)
    else:
        # A quick vocabulary on (a sample of) this corpus, only to count subword tokens.
        n = min(len(corpus), 20000)
        vocab = _train_vocab("--vocab-size", corpus.source[:n], corpus.target[:n], args.vocab_size)
    stats = corpus_stats(corpus, vocab, args.max_length)
    report = {"corpus": corpus.name, **stats.summary(), "max_length": args.max_length}
    print(_json(report))
    return 0


def cmd_vocab_build(args) -> int:
    from keras_memnmt.data.vocab import VOCAB_NAMES, is_saved_vocabulary
    from keras_memnmt.outputs import check_output

    check_output("--out", args.out, directory=True, make_parents=True)
    held = [n for n in VOCAB_NAMES if os.path.lexists(os.path.join(args.out, n))]
    if held and not is_saved_vocabulary(args.out):  # an earlier vocabulary is replaced, a user's files never
        raise ValueError(f"--out {args.out}: holds {held[0]}, which is not part of a vocabulary that "
                         "`memnmt vocab build` saved; choose another --out")
    corpus = _load_corpus(args)
    t0 = time.perf_counter()
    vocab = _train_vocab("--size", corpus.source, corpus.target, args.size, model_type=args.model_type,
                         joint=args.joint, progress=_progress(args))
    vocab.save(args.out)
    print(_json({
        "out": args.out, "pairs": len(corpus), "dropped_empty": corpus.dropped_empty,
        "source_vocab_size": vocab.source.vocab_size,
        "target_vocab_size": vocab.target.vocab_size,
        "seconds": round(time.perf_counter() - t0, 2),
    }))
    return 0


def _recipe_module(name_or_path: str):
    """The recipe module: a name from recipes/ or a path to a recipe .py file.

    Whatever goes wrong while the module runs (an exception, a missing import, a
    ``sys.exit``) is one :class:`~keras_memnmt.config.ConfigError` line naming the recipe
    and, where known, its line.
    """
    import importlib
    import importlib.util

    from keras_memnmt.config import ConfigError

    if name_or_path.endswith(".py") or os.sep in name_or_path:
        if not os.path.isfile(name_or_path):
            raise ConfigError(f"recipe file not found: {name_or_path}")
        spec = importlib.util.spec_from_file_location("memnmt_recipe", name_or_path)
        if spec is None:
            raise ConfigError(f"recipe {name_or_path} is not a Python file (a .py recipe)")
        module = importlib.util.module_from_spec(spec)
        _run_recipe(name_or_path, spec.origin, lambda: spec.loader.exec_module(module))
        return module
    try:
        spec = importlib.util.find_spec(f"recipes.{name_or_path}")
    except (ImportError, ValueError):  # no recipes package, or not a module name
        spec = None
    if spec is None:
        raise ConfigError(f"unknown recipe {name_or_path!r}; recipes: {', '.join(_recipe_names())}")
    return _run_recipe(name_or_path, spec.origin, lambda: importlib.import_module(f"recipes.{name_or_path}"))


def _recipe_names() -> list[str]:
    """The recipes in recipes/ (none where that package cannot be imported)."""
    try:
        import recipes
    except ImportError:
        return []
    folder = os.path.dirname(recipes.__file__)
    return sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and not f.startswith("_"))


def _run_recipe(name: str, origin: str | None, load):
    """``load()``, which runs the recipe module (``origin``: its file), with its failures as
    one ``ConfigError`` line naming the recipe and the line at fault."""
    from keras_memnmt.config import ConfigError

    try:
        return load()
    except SyntaxError as e:
        where = f", line {e.lineno}" if _same_file(e.filename, origin) else f": {e.filename}, line {e.lineno}"
        raise ConfigError(f"recipe {name}{where}: {e.msg}") from None
    except SystemExit as e:
        raise ConfigError(f"recipe {name}{_recipe_line(e, origin)}: calls sys.exit({e.code!r}) when "
                          "loaded; a recipe defines CONFIG (and run), it trains nothing by itself") from None
    except Exception as e:
        raise ConfigError(f"recipe {name}{_recipe_line(e, origin)}: {type(e).__name__}: "
                          f"{_one_line(e)}") from None


def _same_file(a: str | None, b: str | None) -> bool:
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)


def _recipe_line(error: BaseException, origin: str | None) -> str:
    """``", line N"``: the recipe file's last line in ``error``'s traceback (empty if none)."""
    import traceback

    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__)
             if _same_file(frame.filename, origin)]
    return f", line {lines[-1]}" if lines else ""


def load_recipe(name_or_path: str, module=None):
    """A recipe's CONFIG: a name from recipes/ or a path to a recipe .py file (``module``:
    the recipe module, when it is loaded already)."""
    from keras_memnmt.config import ConfigError, TrainConfig, validate

    module = module or _recipe_module(name_or_path)
    if not hasattr(module, "CONFIG"):
        raise ConfigError(f"recipe {name_or_path} defines no CONFIG")
    if not isinstance(module.CONFIG, TrainConfig):
        raise ConfigError(f"recipe {name_or_path}: CONFIG is a {type(module.CONFIG).__name__}, "
                          "expected a keras_memnmt.config.TrainConfig")
    return validate(module.CONFIG)


def _split_recipe_options(module, overrides: list[str]):
    """``(recipe OPTIONS with its --set keys applied, the other overrides)``.

    A recipe with stages of its own (``run``) may declare ``OPTIONS``, a dataclass
    instance whose fields ``--set`` reaches like config fields.
    """
    import typing

    from keras_memnmt.config import convert, parse_overrides

    options = getattr(module, "OPTIONS", None)
    if options is None:
        return None, overrides
    hints = typing.get_type_hints(type(options))
    mine, rest = {}, []
    for item, (key, value) in zip(overrides, parse_overrides(overrides)):
        if key in hints:
            mine[key] = convert(key, value, hints[key])
        else:
            rest.append(item)
    return dataclasses.replace(options, **mine), rest


def cmd_train(args) -> int:
    from keras_memnmt.config import apply_overrides
    from keras_memnmt.outputs import check_output
    from keras_memnmt.training import hosts, train

    # Standard output holds the results alone: what the recipe and Keras's fit print
    # (epochs, progress lines) goes to stderr.
    native = hosts.native_output_to_stderr() if hosts.requested() > 1 else contextlib.nullcontext()
    with contextlib.redirect_stdout(sys.stderr), native:
        hosts.join_requested()  # several processes: before the recipe's checks run JAX at all
        module = _recipe_module(args.recipe)
        recipe_options, overrides = _split_recipe_options(module, args.set or [])
        config = apply_overrides(load_recipe(args.recipe, module), overrides)
        out = args.out or os.path.join("runs", os.path.basename(args.recipe).removesuffix(".py"))
        check_output("--out", out, directory=True, make_parents=True, replaces="run")
        # On a terminal a log line starts on a line of its own, not after a progress bar.
        newline = "\n" if _is_terminal(sys.stderr) else ""
        log = lambda msg: print(f"{newline}[memnmt] {msg}", file=sys.stderr, flush=True)  # noqa: E731
        common = dict(data_dir=args.data_dir, log=log, resume=args.resume, overwrite=args.overwrite)
        run = getattr(module, "run", None)
        if run is None:
            results = train(config, out, **common)
        else:  # a recipe with stages of its own (pre-training, a study), through the public API
            results = run(config, out, options=recipe_options, **common)
    if isinstance(results, str):  # a study's table
        print(results)
        return 0
    results.pop("validations", None)
    print(_json({"run_dir": out, **results}))
    return 0


def _members(args) -> list[tuple[str, str | None]]:
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
    raise ValueError(f"{len(runs)} --model and {len(checkpoints)} --checkpoint: give no --checkpoint, "
                     "one per --model (in the same order; `best` names a run's best.keras), or "
                     "several with a single --model")


class _EnsembleSpec(str):
    """The text of a ``compare --ensemble``, kept in order among the ``--system`` texts."""


def _model_files(members: list[tuple[str, str | None]]) -> list[str]:
    """The model files that the ``--checkpoint`` of ``members`` name, where they exist (a
    run's own best.keras is a file of the run: no output may be it anyway)."""
    from keras_memnmt.runs import checkpoint_path

    files = []
    for run, checkpoint in members:
        if checkpoint is not None:
            with contextlib.suppress(FileNotFoundError):  # loading it says what is missing
                files.append(checkpoint_path(run, checkpoint))
    return files


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


def cmd_translate(args) -> int:
    from keras_memnmt.inference import translate_chunks
    from keras_memnmt.runs import load_ensemble

    search = _search(args)  # bad options fail before the model is loaded
    if args.resume and not args.output:
        raise ValueError("--resume continues an --output file; give --output")
    members = _members(args)
    if args.output:
        from keras_memnmt.outputs import check_output

        inputs = [("the --input file", args.input)] if args.input else []
        check_output("--output", args.output,
                     inputs=inputs + [("a model file to translate with", f) for f in _model_files(members)])
    partial = _partial_output(args.output) if args.resume and os.path.isfile(args.output) else None
    # The model first: a bad --model is reported before standard input is waited for.
    model, vocab, _ = load_ensemble(members)
    if args.input:
        from keras_memnmt.data import read_lines

        lines = read_lines(args.input)
    else:
        lines = _read_stdin()
    done = 0
    if partial:  # keep the complete lines; an unfinished last one (no newline) is translated again
        done, end, size = partial
        if done > len(lines):
            raise ValueError(f"--resume: {args.output} has {done} lines, more than the input's "
                             f"{len(lines)}; nothing was changed")
        if end < size:
            with open(args.output, "r+b") as f:
                f.truncate(end)
        if not args.quiet:
            print(f"resume: {args.output} holds {done} of {len(lines)} lines; translating the rest",
                  file=sys.stderr)
    name = f"--output {args.output}" if args.output else "<stdout>"
    try:
        out = open(args.output, "a" if args.resume else "w", encoding="utf-8") if args.output else sys.stdout
    except OSError as e:
        raise OSError(f"cannot write {name}: {e.strerror or e}") from e
    try:
        # Chunk by chunk in input order (each sorted by length inside): a finished chunk
        # is written at once, so a long run's output grows as it goes and --resume can
        # continue it.
        number = done
        for chunk in translate_chunks(model, vocab, lines[done:], chunk_size=args.chunk_size,
                                      beam_size=args.beam, progress=_progress(args),
                                      alignments=args.show_attention, **search):
            if not args.show_attention:
                _write(out, "".join(line + "\n" for line in chunk), name)
                continue
            for line, alignment in chunk:  # the line as always; its alignment on stderr
                number += 1
                _write(out, line + "\n", name)
                _print_alignment(number, alignment)
    except BaseException:
        if args.output:
            with contextlib.suppress(OSError):  # the error on its way is the one to report
                out.close()
        raise
    if args.output:
        try:
            out.close()
        except OSError as e:
            raise OSError(f"cannot write {name}: {e.strerror or e}") from e
    return 0


def _progress(args) -> bool | None:
    """Progress bars: off with --quiet, else drawn when stderr is a terminal (None)."""
    return False if getattr(args, "quiet", False) else None


def _print_alignment(number: int, alignment: list) -> None:
    """``translate --show-attention``: each target subword of line ``number`` with the
    source subword it attends to most, and that weight, on stderr."""
    if not alignment:
        return
    width = max(len(target) for target, _, _ in alignment)
    rows = [f"  {target:<{width}}  <- {source}  {weight:.2f}" for target, source, weight in alignment]
    print(f"alignment {number}:", *rows, sep="\n", file=sys.stderr, flush=True)


def cmd_plot(args) -> int:
    from keras_memnmt.inspection import inspect_pair
    from keras_memnmt.outputs import check_output
    from keras_memnmt.plots import figure_size, save_plot
    from keras_memnmt.runs import load_run

    if not args.out.endswith(".png"):
        raise ValueError(f"--out must name a .png file, got {args.out!r}")
    check_output("--out", args.out, inputs=[("the model file to plot", f) for f in
                                            _model_files([(args.model, args.checkpoint)])])
    model, vocab, _ = load_run(args.model, args.checkpoint)
    inspection = inspect_pair(model, vocab, args.source, args.reference)
    save_plot(inspection, args.out)
    width, height = figure_size(inspection)
    print(_json({"out": args.out, "model": inspection.model_name, "source": inspection.source,
                 "target": inspection.target, "teacher_forced": inspection.teacher_forced,
                 "panels": sorted(inspection.details), "inches": [width, height]}))
    return 0


def cmd_evaluate(args) -> int:
    from keras_memnmt.compare import available_test_sets
    from keras_memnmt.inference import score, translate
    from keras_memnmt.records import store_evaluation
    from keras_memnmt.runs import checkpoint_path, load_ensemble

    search = _search(args)  # bad options fail before the model is loaded
    members = _members(args)
    model, vocab, config = load_ensemble(members)  # the first member's config
    # A single run's own model (best.keras) on a whole split is stored in the run
    # (hyps/ and record.json); an ensemble, another checkpoint or --limit is printed only.
    (run, checkpoint), *others = members
    store = not others and not args.limit and checkpoint in (None, "best")
    note = lambda msg: print(f"memnmt evaluate: {msg}", file=sys.stderr)  # noqa: E731
    sets, skipped = available_test_sets(config, args.split, args.data_dir, note=note)
    ensemble = {"ensemble": [run if checkpoint is None else f"{run}:{checkpoint}" for run, checkpoint in members]}
    reports = []
    for test, split, name in sets:
        test = test.take(args.limit)
        hyps = translate(model, vocab, test.source, beam_size=args.beam, progress=_progress(args), **search)
        report = {"corpus": name, "beam_size": args.beam, **search, **(ensemble if others else {}),
                  **score(hyps, test.target)}
        if store:
            model_file = checkpoint_path(run, "best") if checkpoint else None
            try:
                entry = store_evaluation(run, split, hyps, test.target, report, args.beam, corpus=name,
                                         model_file=model_file, **search)
                report["hypotheses"] = os.path.join(run, entry["hypotheses"])
            except OSError as e:  # a run directory we may not write to: print the scores all the same
                note(f"could not store the translations in {run}: {e}")
        reports.append(report)
    if args.split == "all":
        print(_json({"splits": reports, "skipped": skipped}))
    else:
        print(_json(reports[0]))
    return 0


def cmd_compare(args) -> int:
    from keras_memnmt.compare import compare, ensemble_system, parse_systems, print_table

    search = _search(args)
    systems = parse_systems(args.runs, [ensemble_system(s) if isinstance(s, _EnsembleSpec) else s
                                        for s in args.system or []])
    if args.json:
        from keras_memnmt.outputs import check_output

        members = [m for s in systems for m in s.members or []]
        check_output("--json", args.json, inputs=[("the model file to compare", f) for f in _model_files(members)])
    log = (lambda msg: None) if args.quiet else \
        (lambda msg: print(f"memnmt compare: {msg}", file=sys.stderr, flush=True))
    result = compare(systems, split=args.split, beam_size=args.beam, data_dir=args.data_dir,
                     limit=args.limit, seed=args.seed, bootstrap=args.bootstrap, trials=args.trials,
                     log=log, **search)
    text = _json(result)
    if args.json:
        try:
            with open(args.json, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        except OSError as e:  # the comparison is not lost: its JSON goes to stdout
            print(text)
            raise OSError(f"cannot write --json {args.json}: {e.strerror or e}; "
                          "the JSON went to stdout instead") from e
        print_table(result)
    else:  # the JSON on stdout, the table on stderr
        print_table(result, file=sys.stderr)
        print(text)
    return 0


def _results_text(args, base: str = "") -> str:
    """The table of ``memnmt results``; run paths are taken relative to ``base``."""
    from keras_memnmt.records import check_run_dir
    from keras_memnmt.results import results_table, run_summary

    search = _search(args)
    summaries = []
    for run in args.runs:
        path = os.path.join(base, run)
        if os.path.isdir(path):  # a missing folder: run_summary's own message
            check_run_dir(path)
        summaries.append({**run_summary(path, split=args.split, beam_size=args.beam, **search), "run": run})
    return results_table(summaries, format=args.format)


def marked_tables(path: str) -> tuple[str, str, int]:
    """A Markdown file's text, the same text with its marked tables rendered again, and their count.

    Each table is marked by the ``memnmt results`` arguments that make it (see
    :func:`keras_memnmt.results.update_marked_tables`), with run paths relative to the
    file's folder.
    """
    from keras_memnmt.results import update_marked_tables

    parser = build_parser()
    base = os.path.dirname(path)

    def render(argv: list[str]) -> str:
        try:
            args = parser.parse_args(["results", *argv])
        except SystemExit:  # argparse has printed what it rejects
            raise ValueError("the marker's arguments are not those of `memnmt results` (above)") from None
        if args.update:
            raise ValueError("a marked table's command cannot itself use --update")
        return _results_text(args, base)

    with open(path, encoding="utf-8") as f:
        text = f.read()
    new, count = update_marked_tables(text, render, name=path)
    return text, new, count


def cmd_results(args) -> int:
    if args.update:
        if args.runs:
            raise ValueError("give run directories or --update FILE, not both")
        given = [flag for flag, value, default in (
            ("--format", args.format, "markdown"), ("--split", args.split, None), ("--beam", args.beam, 5),
            ("--length-penalty", args.length_penalty, "gnmt"), ("--alpha", args.alpha, 0.6)) if value != default]
        if given:
            raise ValueError(f"--update takes each table's options from its marker; remove {given[0]}")
        from keras_memnmt.outputs import check_output

        for path in args.update:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"--update: no such file: {path}")
            check_output("--update", path)
        updated = [(path, *marked_tables(path)) for path in args.update]  # every table renders before a write
        for path, old, new, count in updated:
            if new != old:
                from keras_memnmt.files import write_text

                write_text(path, new)
            print(f"{path}: {count} marked table{'s' * (count != 1)}, "
                  f"{'updated' if new != old else 'unchanged'}")
        return 0
    if not args.runs:
        raise ValueError("give run directories, or --update FILE")
    print(_results_text(args))
    return 0


def cmd_average(args) -> int:
    from keras_memnmt.outputs import check_output
    from keras_memnmt.runs import average_checkpoints, checkpoint_path, last_checkpoints

    if not args.out.endswith(".keras"):
        raise ValueError(f"--out must name a .keras file, got {args.out!r}")
    if args.last is not None:
        paths = last_checkpoints(args.model, args.last)
    else:
        if not os.path.isdir(args.model):
            raise FileNotFoundError(f"model directory not found: {args.model}")
        paths = [checkpoint_path(args.model, c) for c in args.checkpoint]
    check_output("--out", args.out, make_parents=True,
                 inputs=[("one of the checkpoints to average", p) for p in paths])
    average_checkpoints(paths, args.out)
    print(_json({"out": args.out, "averaged": paths}))
    return 0


def cmd_archive(args) -> int:
    from keras_memnmt.outputs import check_output
    from keras_memnmt.records import archive_files, archive_run

    if len(args.runs) > 1 or args.into:  # each run into OUT/<its folder's name>
        names = [os.path.basename(os.path.normpath(run)) for run in args.runs]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two runs named {twice[0]!r} would share one folder of --out; "
                             "archive them one at a time")
        targets = [os.path.join(args.out, name) for name in names]
        check_output("--out", args.out, directory=True, make_parents=True, replaces="archive")
    else:
        targets = [args.out]
    for target in targets:  # an earlier archive may be replaced, never a run
        check_output("--out", target, directory=True, make_parents=True, replaces="archive",
                     inputs=[("a run to archive", run) for run in args.runs])
    for run, target in zip(args.runs, targets):  # every refusal before the first copy
        archive_files(run, target, overwrite=args.overwrite)
    archived = {}
    for run, target in zip(args.runs, targets):
        archived[target] = archive_run(run, target, overwrite=args.overwrite)
        print(f"memnmt archive: {run} -> {target} ({len(archived[target])} files)", file=sys.stderr)
    print(_json(archived))
    return 0


def cmd_export(args) -> int:
    import signal

    from keras_memnmt.export import export_runs
    from keras_memnmt.export.saved_model import METADATA_FILE
    from keras_memnmt.outputs import check_output

    search = _search(args)  # bad options fail before the model is loaded
    if args.n_best is not None and args.n_best > args.beam:
        raise ValueError(f"--n-best {args.n_best} is more than --beam {args.beam}: a beam search keeps "
                         "--beam hypotheses")
    members = _members(args)
    read = [("a run to export", run) for run, _ in members]
    check_output("--out", args.out, directory=True, make_parents=True,
                 inputs=read + [("a model file to export", f) for f in _model_files(members)])
    # SIGTERM becomes SystemExit, so an interrupted export removes its partial directory.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    export_runs(members, args.out, beam_size=args.beam, max_length=args.max_length,
                n_best=args.n_best, overwrite=args.overwrite, **search)
    with open(os.path.join(args.out, METADATA_FILE), encoding="utf-8") as f:
        print(_json({"out": args.out, **json.load(f)}))
    return 0


def _search(args) -> dict:
    """The beam search's length normalization from the command line."""
    if args.alpha < 0:
        raise ValueError(f"--alpha must be >= 0, got {args.alpha}")
    return {"length_penalty": args.length_penalty, "alpha": args.alpha}


def _add_search_args(parser) -> None:
    parser.add_argument("--beam", type=_positive_int, default=5, help="beam size (1 = greedy)")
    parser.add_argument("--length-penalty", choices=("gnmt", "average", "none"), default="gnmt",
                        help="beam scores: log P / ((5+|Y|)/6)^alpha (gnmt, default), / |Y| (average), "
                             "or plain log P (none)")
    parser.add_argument("--alpha", type=_finite_float, default=0.6, help="GNMT length-penalty exponent (default 0.6)")


CHECKPOINT_HELP = ("another model file of the run instead of best.keras: a name in "
                   "MODEL/checkpoints (e.g. step3199) or a path to a .keras file")
ENSEMBLE_CHECKPOINT_HELP = (CHECKPOINT_HELP + ". Repeatable: with several --model, give none (each run's "
                            "best.keras) or one per --model, paired in order (`best` names a run's "
                            "best.keras); with one --model, several --checkpoint translate with an "
                            "ensemble of those checkpoints of that run")
SPLIT_HELP = ("Multi30k split (default test_2016_flickr), or `all`: every test split the loader "
              "knows, skipping with a note those whose files are not available (a synthetic run "
              "has its own test set)")
MODEL_HELP = ("run directory written by `memnmt train`. Repeat it (--model A --model B) to translate "
              "with an ensemble: at every step the models' log-probabilities are averaged and "
              "renormalized. The runs must have the same source and target vocabularies (the "
              "first run's encode and decode)")


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
    check.add_argument("--vocab-size", type=_vocab_size, default=8000)
    check.add_argument("--max-length", type=_positive_int, default=80,
                       help="pairs longer than this many subword tokens count as dropped")
    check.set_defaults(func=cmd_data_check)

    vocab = sub.add_parser("vocab", help="subword vocabularies")
    vocab_sub = vocab.add_subparsers(dest="vocab_command", required=True, metavar="ACTION")
    build = vocab_sub.add_parser("build", help="train SentencePiece on a training split")
    _add_corpus_args(build)
    build.add_argument("--out", required=True, help="output folder")
    build.add_argument("--size", type=_vocab_size, default=8000, help="vocabulary size (default 8000)")
    build.add_argument("--model-type", choices=("unigram", "bpe"), default="unigram")
    build.add_argument("--joint", action="store_true", help="one vocabulary for both sides")
    build.add_argument("--quiet", action="store_true", help="no progress bar (drawn only on a terminal)")
    build.set_defaults(func=cmd_vocab_build)

    tr = sub.add_parser("train", help="train a model from a recipe")
    tr.add_argument("recipe", help="recipe name from recipes/ (e.g. multi30k_rnnsearch) or a path")
    tr.add_argument("--data-dir", help="local Multi30k folder (default: $MEMNMT_DATA, cache, download)")
    tr.add_argument("--out", help="run directory (default: runs/RECIPE)")
    tr.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override a config field or an option of the model (or of the recipe), "
                         "e.g. --set epochs=2 --set train_limit=1000 --set memory_size=4")
    tr.add_argument("--resume", action="store_true",
                    help="continue from OUT/model.keras (weights and optimizer state)")
    tr.add_argument("--overwrite", action="store_true",
                    help="OUT already holds a run: remove its files and start over "
                         "(without --resume or --overwrite that is an error)")
    tr.set_defaults(func=cmd_train)

    tl = sub.add_parser("translate", help="translate text with a trained run directory")
    tl.add_argument("--model", required=True, action="append", help=MODEL_HELP)
    tl.add_argument("--checkpoint", action="append", help=ENSEMBLE_CHECKPOINT_HELP)
    _add_search_args(tl)
    tl.add_argument("--input", help="input file, one sentence per line (default: stdin)")
    tl.add_argument("--output", help="output file (default: stdout); written a chunk at a time, "
                    "in input order, as the translation goes")
    tl.add_argument("--resume", action="store_true",
                    help="continue a partly written --output: keep its complete lines and "
                         "translate the input from the next line on")
    tl.add_argument("--chunk-size", type=_positive_int, default=4096,
                    help="input lines translated (sorted by length) and written together (default 4096)")
    tl.add_argument("--quiet", action="store_true", help="no progress bar (drawn only on a terminal)")
    tl.add_argument("--show-attention", action="store_true",
                    help="after each translated line, print on stderr each target subword with the "
                         "source subword it attends to most and that weight (models with source "
                         "attention); the translations themselves are unchanged")
    tl.set_defaults(func=cmd_translate)

    ev = sub.add_parser("evaluate", help="translate a split and print sacreBLEU scores as JSON")
    ev.add_argument("--model", required=True, action="append", help=MODEL_HELP)
    ev.add_argument("--checkpoint", action="append", help=ENSEMBLE_CHECKPOINT_HELP)
    ev.add_argument("--split", default="test_2016_flickr", help=SPLIT_HELP)
    ev.add_argument("--data-dir")
    _add_search_args(ev)
    ev.add_argument("--limit", type=_positive_int, help="score only the first N sentences")
    ev.add_argument("--quiet", action="store_true", help="no progress bar (drawn only on a terminal)")
    ev.set_defaults(func=cmd_evaluate)

    pl = sub.add_parser("plot", help="draw what a run's decoder attends to, reads and writes for one "
                        "sentence (a PNG: source attention, memory read/write weights, ...)")
    pl.add_argument("--model", required=True, help="run directory written by `memnmt train`")
    pl.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    pl.add_argument("--source", required=True, help="the source sentence")
    pl.add_argument("--reference", help="a target sentence to force the decoder on (default: the "
                    "model's own greedy translation)")
    pl.add_argument("--out", default="plot.png", help="the PNG file to write (default: plot.png)")
    pl.set_defaults(func=cmd_plot)

    cp = sub.add_parser("compare", help="test systems against a baseline on a split: sacreBLEU "
                        "scores, 95%% confidence intervals, paired bootstrap and approximate "
                        "randomization p-values")
    cp.add_argument("runs", nargs="*", metavar="RUN", help="run directories, each a system; the "
                    "first system (these, then each --system) is the baseline")
    cp.add_argument("--system", action="append", metavar="NAME=RUN1,RUN2,...",
                    help="a system of several runs (seeds): mean and standard deviation over them, "
                         "and a test of each run against the baseline's run of the same position "
                         "(or against the baseline's single run). Repeatable")
    cp.add_argument("--ensemble", action="append", dest="system", type=_EnsembleSpec,
                    metavar="NAME=RUN[:CHECKPOINT],...",
                    help="a system that is one ensemble of these runs' models (each run's best.keras, "
                         "or the CHECKPOINT named: a name in RUN/checkpoints, `best`, or a path to a "
                         ".keras file such as `memnmt average` writes), translating "
                         "as `memnmt evaluate --model ... --checkpoint ...` does; its translations are "
                         "not stored. Repeatable; systems are taken in the order given")
    cp.add_argument("--split", default="test_2016_flickr", help=SPLIT_HELP)
    cp.add_argument("--data-dir")
    _add_search_args(cp)
    cp.add_argument("--limit", type=_positive_int, help="compare on the first N sentences only")
    cp.add_argument("--seed", type=int, default=12345,
                    help="seed of the resampling (sacreBLEU's SACREBLEU_SEED; default 12345, its own)")
    cp.add_argument("--bootstrap", type=_positive_int, default=1000, metavar="N",
                    help="paired bootstrap resamples (default 1000)")
    cp.add_argument("--trials", type=_positive_int, default=10000, metavar="N",
                    help="approximate randomization trials (default 10000)")
    cp.add_argument("--json", metavar="FILE", help="write the JSON here and the table to stdout "
                    "(default: the JSON to stdout, the table to stderr)")
    cp.add_argument("--quiet", action="store_true", help="no progress messages")
    cp.set_defaults(func=cmd_compare)

    rs = sub.add_parser("results", help="a results table rendered from run directories' records")
    rs.add_argument("runs", nargs="*", metavar="RUN", help="run directories")
    rs.add_argument("--format", choices=("markdown", "json"), default="markdown")
    rs.add_argument("--update", nargs="+", metavar="FILE",
                    help="render again every table these Markdown files mark with "
                    "`<!-- memnmt results ARGS -->` ... `<!-- end memnmt results -->` "
                    "(run paths relative to the file's folder)")
    rs.add_argument("--split", help="the scores stored for this split by `memnmt evaluate` or "
                    "`memnmt compare` with the search options below (default: the training's own test)")
    _add_search_args(rs)
    rs.set_defaults(func=cmd_results)

    av = sub.add_parser("average", help="average the weights of a run's checkpoints into one .keras file")
    av.add_argument("--model", required=True, help="run directory written by `memnmt train` "
                    "(with --set keep_checkpoints=true for --last)")
    which = av.add_mutually_exclusive_group(required=True)
    which.add_argument("--last", type=int, metavar="K",
                       help="the last K kept checkpoints, MODEL/checkpoints/step{N}.keras by N")
    which.add_argument("--checkpoint", action="append",
                       help="a checkpoint to average, repeatable: a name in MODEL/checkpoints "
                            "(e.g. step3199) or a path to a .keras file")
    av.add_argument("--out", required=True, help="the averaged model, a .keras file (float weights: "
                    "the mean; integer state: the newest's; no optimizer state); translate with "
                    "--checkpoint OUT")
    av.set_defaults(func=cmd_average)

    ar = sub.add_parser("archive", help="copy runs' records and translations, without weights, "
                        "to a folder that can be kept with the code (`results` and `compare` read it)")
    ar.add_argument("runs", nargs="+", metavar="RUN", help="run directories written by `memnmt train`")
    ar.add_argument("--out", required=True, help="the archive folder of one RUN; with several RUNs "
                    "(or --into), the folder that receives OUT/<RUN's folder name> for each")
    ar.add_argument("--into", action="store_true", help="one RUN too goes to OUT/<its folder name>")
    ar.add_argument("--overwrite", action="store_true", help="replace an earlier archive in --out")
    ar.set_defaults(func=cmd_archive)

    ex = sub.add_parser("export", help="write a TensorFlow SavedModel that translates strings "
                        "(tokenizer, search and detokenizer in one graph)")
    ex.add_argument("--model", required=True, action="append", help=MODEL_HELP)
    ex.add_argument("--checkpoint", action="append", help=ENSEMBLE_CHECKPOINT_HELP)
    ex.add_argument("--out", required=True, help="the SavedModel directory (written beside it, "
                    "then renamed into place)")
    _add_search_args(ex)
    ex.add_argument("--max-length", type=_positive_int, default=200, metavar="N",
                    help="source sentences are truncated to N subword tokens (default 200, as "
                         "`memnmt translate`)")
    ex.add_argument("--n-best", type=_positive_int, metavar="N",
                    help="hypotheses per sentence of the translate_n_best signature "
                         "(default: the beam size)")
    ex.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    ex.set_defaults(func=cmd_export)
    return parser


def console_main() -> None:
    """The `memnmt` console script: the process-wide setup, then :func:`main`."""
    _setup_process()
    sys.exit(main())


def main(argv: list[str] | None = None) -> int:
    """Runs one `memnmt` command (``argv`` without the program name; default: ``sys.argv[1:]``)
    in this process and returns its exit status. The process-wide setup of the `memnmt`
    command (malloc tuning) is left to :func:`console_main`."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("memnmt: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    from keras_memnmt.records import set_command

    set_command(["memnmt", *(sys.argv[1:] if argv is None else argv)])  # for run records
    from keras_memnmt.runtime import import_tensorflow_without_jax

    # After parsing, so `--help` and usage errors stay fast; 109 MB less where jax is
    # installed (see its docstring).
    import_tensorflow_without_jax()
    from keras_memnmt.data import CorpusError, DownloadError

    try:
        return args.func(args)
    except FloatingPointError as e:  # a diverged training (keras_memnmt.training.TrainingDiverged)
        print(f"memnmt: error: {e}", file=sys.stderr)
        return 3
    except BrokenPipeError as e:
        if _stdout_closed():  # the reader went away (`memnmt translate ... | head`): no message
            return 141  # 128 + SIGPIPE, as a process the signal ended
        print(f"memnmt: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except (CorpusError, DownloadError, OSError, ValueError) as e:
        # ConfigError, CheckpointError (ValueError); FileNotFoundError, FileExistsError,
        # PermissionError, a full disk (OSError)
        print(f"memnmt: error: {_one_line(e)}", file=sys.stderr)
        return 2


def _one_line(error: BaseException) -> str:
    """An exception's message on one line (its type's name when it has none)."""
    return " ".join(line.strip() for line in str(error).splitlines() if line.strip()) or type(error).__name__


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (poll reports an error on
    its write end); if so it is pointed at os.devnull, so that the interpreter's last
    flush stays quiet."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        events = poller.poll(0)
    except (AttributeError, OSError, ValueError):  # no poll, or no file descriptor (a test's capture)
        return False
    if not any(mask & (select.POLLERR | select.POLLHUP) for _, mask in events):
        return False
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    return True


if __name__ == "__main__":
    console_main()
