"""``python -m keras_memnmt.cli``: the ``memnmt`` command."""

from keras_memnmt.cli.main import console_main

console_main()
