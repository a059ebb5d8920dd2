"""The ``memnmt`` command line (:mod:`keras_memnmt.cli.main`): ``main(argv)`` runs one command
in this process and returns its exit status; ``console_main`` is the ``memnmt`` script."""

from keras_memnmt.cli.args import MAX_INT
from keras_memnmt.cli.main import _setup_process, build_parser, console_main, main  # noqa: F401
from keras_memnmt.cli.results import marked_tables

__all__ = ["MAX_INT", "build_parser", "console_main", "main", "marked_tables"]
