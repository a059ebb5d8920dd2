"""A run directory: what ``memnmt train`` writes, how it is loaded, locked and recorded.

- :mod:`~keras_memnmt.rundir.runs`: the file layout, preparing and locking a run, loading
  its config, model, vocabulary or an ensemble of runs, checkpoints and their average;
- :mod:`~keras_memnmt.rundir.records`: the run record (provenance, evaluations and the
  translations they scored);
- :mod:`~keras_memnmt.rundir.archive`: a run's records without its weights;
- :mod:`~keras_memnmt.rundir.outputs`: the one rule every command applies to a path it writes;
- :mod:`~keras_memnmt.rundir.tables`: results tables rendered from records.
"""

from keras_memnmt.rundir.archive import archive_run
from keras_memnmt.rundir.outputs import check_output
from keras_memnmt.rundir.records import read_record
from keras_memnmt.rundir.runs import (
    CheckpointError,
    RunLockedError,
    average_checkpoints,
    checkpoint_path,
    last_checkpoints,
    load_ensemble,
    load_model,
    load_run,
    read_config,
)
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
