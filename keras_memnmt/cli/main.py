"""The ``memnmt`` command line: parse, dispatch, exit codes.

The subcommands and flags are a contract (scripts rely on them): extend, never rename.
``memnmt --help`` lists only the subcommands that exist. Each command group is a module
of this package that adds its own subparser (``add_parsers``); a command's work is done
by the library, which the command imports when it runs, so that ``--help`` and usage
errors stay fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from keras_memnmt.cli import (
    data,
    evaluate,
    export,
    plot,
    results,
    runfiles,
    score,
    serve,
    train,
    translate,
)


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


# Each group's module adds its subcommands, in the order `memnmt --help` lists them.
GROUPS = (data, train, translate, score, evaluate, plot, results, runfiles, export, serve)


DESCRIPTION = (
    "Memory-augmented recurrent neural machine translation in Keras 3: train, translate, "
    "score, evaluate, compare, export and serve. `memnmt COMMAND --help` describes a command."
)


def build_parser() -> argparse.ArgumentParser:
    from keras_memnmt import __version__

    parser = argparse.ArgumentParser(prog="memnmt", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"memnmt (keras_memnmt) {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.add_parsers(sub)
    parser.set_defaults(commands=sub.choices)
    return parser


def parse(argv: list[str] | None) -> argparse.Namespace:
    """``argv`` parsed; a flag that the command does not know is an error of that
    command's own parser (its usage, not the top level's)."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = args.commands.get(args.command, parser)
        while True:  # down to the innermost command given (`vocab build`)
            inner = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
            chosen = getattr(args, inner[0].dest, None) if inner and inner[0].dest != argparse.SUPPRESS else None
            if chosen not in (inner[0].choices if inner else {}):
                break
            command = inner[0].choices[chosen]
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


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
    args = parse(argv)
    from keras_memnmt.runtime import import_tensorflow_without_jax

    # After parsing, so `--help` and usage errors stay fast; 109 MB less where jax is
    # installed (see its docstring). Before anything imports Keras (the run-directory
    # package below does): TensorFlow's CPU is split into XLA_FLAGS' devices only before
    # TensorFlow sets them up.
    import_tensorflow_without_jax()
    from keras_memnmt.rundir.provenance import set_command

    set_command(["memnmt", *(sys.argv[1:] if argv is None else argv)])  # for run records
    from keras_memnmt.data import CorpusError, DownloadError

    try:
        return args.func(args)
    except FloatingPointError as e:  # a diverged training (keras_memnmt.training.TrainingDiverged)
        print(f"memnmt: error: {e}", file=sys.stderr)
        return 3
    except BrokenPipeError as e:
        if _stdout_closed():  # the reader went away (`memnmt translate ... | head`): no message
            return 141  # 128 + SIGPIPE, as a process the signal ended
        print(f"memnmt: error: {one_line(e)}", file=sys.stderr)
        return 2
    except (CorpusError, DownloadError, OSError, ValueError) as e:
        # ConfigError, CheckpointError (ValueError); FileNotFoundError, FileExistsError,
        # PermissionError, a full disk (OSError)
        print(f"memnmt: error: {one_line(e)}", file=sys.stderr)
        return 2


def one_line(error: BaseException) -> str:
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
