"""``python -m keras_memnmt.export REQUEST_JSON``: one export under the TensorFlow backend.

:func:`keras_memnmt.export.export_translator` and :func:`~keras_memnmt.export.export_runs`
start this with ``KERAS_BACKEND=tensorflow`` when the calling process runs another
backend. ``REQUEST_JSON`` names either ``members`` (run directories, or
``[run, checkpoint]`` pairs) or ``model_file`` and ``vocab_dir``, plus ``out_dir``,
``options``, ``overwrite`` and ``metadata``. An error is printed as one
``memnmt export: error: {"type": ..., "message": ...}`` line and exits with status 2.
"""

from __future__ import annotations

import json
import os
import signal
import sys


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # SIGTERM (the parent interrupted) becomes SystemExit, so the partial directory is removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    request = json.loads((argv if argv is not None else sys.argv[1:])[0])
    import keras

    from keras_memnmt.export.saved_model import ERROR_PREFIX, _export, check_options

    def fail(kind: str, message: str) -> int:
        print(ERROR_PREFIX + json.dumps({"type": kind, "message": message}), file=sys.stderr)
        return 2

    if keras.backend.backend() != "tensorflow":
        return fail("ExportError", "the export subprocess needs KERAS_BACKEND=tensorflow")
    from keras_memnmt.data import SubwordVocab

    try:
        options = check_options(**request["options"])
        if "members" in request:
            from keras_memnmt.rundir.loading import load_ensemble

            model, vocab, _ = load_ensemble([tuple(m) for m in request["members"]])
        else:
            import keras_memnmt.models  # noqa: F401  (registers the model classes)

            model = keras.saving.load_model(request["model_file"], compile=False)
            vocab = SubwordVocab.load(request["vocab_dir"])
        _export(model, vocab, request["out_dir"], options, request["overwrite"], request["metadata"])
    except (FileNotFoundError, FileExistsError, ValueError, TypeError) as e:
        return fail(type(e).__name__, str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
