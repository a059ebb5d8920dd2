"""``memnmt train``: a recipe, its overrides and its run directory."""

from __future__ import annotations

import contextlib
import os
import sys

from keras_memnmt.cli.args import (
    as_json,
    is_terminal,
)


def cmd_train(args) -> int:
    from keras_memnmt.config import apply_overrides
    from keras_memnmt.recipes import load_recipe, recipe_module, split_recipe_options
    from keras_memnmt.rundir.outputs import check_output
    from keras_memnmt.training import hosts, train

    # Standard output holds the results alone: what the recipe and Keras's fit print
    # (epochs, progress lines) goes to stderr.
    native = hosts.native_output_to_stderr() if hosts.requested() > 1 else contextlib.nullcontext()
    stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr), native:
        hosts.join_requested()  # several processes: before the recipe's checks run JAX at all
        module = recipe_module(args.recipe)
        recipe_options, overrides = split_recipe_options(module, args.set or [])
        config = apply_overrides(load_recipe(args.recipe, module), overrides)
        if args.show_config:  # nothing is trained or written
            from keras_memnmt.config.reference import show_config

            title = f"memnmt train {args.recipe}" + "".join(f" --set {item}" for item in args.set or [])
            print(show_config(config, title), end="", file=stdout)
            return 0
        if args.recipe.endswith(".json"):  # a config file: its run directory is given
            _check_config_out(args.recipe, args.out)
        out = args.out or os.path.join("runs", os.path.basename(args.recipe).removesuffix(".py"))
        check_output("--out", out, directory=True, make_parents=True, replaces="run")
        # On a terminal a log line starts on a line of its own, not after a progress bar.
        newline = "\n" if is_terminal(sys.stderr) else ""
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
    print(as_json({"run_dir": out, **results}))
    return 0


def _check_config_out(config_file: str, out: str | None) -> None:
    """A JSON config trains into a given ``--out``, never the folder it lies in (the run
    it was read from would be written over)."""
    if not out:
        raise ValueError(f"{config_file} names no run directory: give --out NEW")
    folder = os.path.realpath(os.path.dirname(os.path.abspath(config_file)))
    if os.path.realpath(out) == folder:
        raise ValueError(
            f"--out {out} holds {os.path.basename(config_file)}, the config it would train from: "
            "give another --out (--resume continues a run: memnmt train RECIPE --out RUN --resume)"
        )


def add_parsers(sub) -> None:
    """The ``train`` command."""
    tr = sub.add_parser("train", help="train a model from a recipe")
    tr.add_argument(
        "recipe",
        help="a recipe's name (e.g. multi30k_rnnsearch; an unknown name "
        "lists them), the path of a recipe .py file, or a JSON file of settings (a run's "
        "config.json trains the same settings again, with --out NEW)",
    )
    tr.add_argument("--data-dir", help="local Multi30k folder (default: $MEMNMT_DATA, cache, download)")
    tr.add_argument("--out", help="run directory (default: runs/RECIPE)")
    tr.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a config field or an option of the model (or of the recipe), "
        "e.g. --set epochs=2 --set train_limit=1000 --set memory_size=4",
    )
    tr.add_argument("--resume", action="store_true", help="continue from OUT/model.keras (weights and optimizer state)")
    tr.add_argument(
        "--overwrite",
        action="store_true",
        help="OUT already holds a run: remove its files and start over "
        "(without --resume or --overwrite that is an error)",
    )
    tr.add_argument(
        "--show-config",
        action="store_true",
        help="print the recipe's settings as they resolve (with --set), each with its "
        "meaning (docs/config.md; * marks a value other than the default), and exit "
        "without training",
    )
    tr.set_defaults(func=cmd_train)
