"""A run directory: what ``memnmt train`` writes, how it is loaded, locked and recorded.

- :mod:`~keras_memnmt.rundir.layout`: the files a run holds, and its config;
- :mod:`~keras_memnmt.rundir.prepare`: a training's run directory (an earlier run refused,
  removed or resumed) and the resume check;
- :mod:`~keras_memnmt.rundir.lock`: one writer per run directory;
- :mod:`~keras_memnmt.rundir.checkpoints`: a run's model files, and checkpoints' average;
- :mod:`~keras_memnmt.rundir.loading`: loading a run's model, vocabulary and config, or an
  ensemble of runs;
- :mod:`~keras_memnmt.rundir.runs`: the public façade: the five modules above in one;
- :mod:`~keras_memnmt.rundir.records`: the run record (evaluations and the translations
  they scored);
- :mod:`~keras_memnmt.rundir.provenance`: what made a file (command, code, versions, machine);
- :mod:`~keras_memnmt.rundir.archive`: a run's records without its weights;
- :mod:`~keras_memnmt.rundir.outputs`: the one rule every command applies to a path it writes;
- :mod:`~keras_memnmt.rundir.tables`: results tables rendered from records.
"""

from keras_memnmt.rundir.archive import archive_run
from keras_memnmt.rundir.checkpoints import CheckpointError, average_checkpoints, checkpoint_path, last_checkpoints
from keras_memnmt.rundir.layout import read_config
from keras_memnmt.rundir.loading import load_ensemble, load_model, load_run
from keras_memnmt.rundir.lock import RunLockedError
from keras_memnmt.rundir.outputs import check_output
from keras_memnmt.rundir.records import read_record
from keras_memnmt.rundir.tables import results_table, run_summary

__all__ = [
    "CheckpointError",
    "RunLockedError",
    "archive_run",
    "average_checkpoints",
    "check_output",
    "checkpoint_path",
    "last_checkpoints",
    "load_ensemble",
    "load_model",
    "load_run",
    "read_config",
    "read_record",
    "results_table",
    "run_summary",
]
