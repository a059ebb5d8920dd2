"""Run directories, the public façade: the names of the modules that make up a run
directory, reachable from one module.

- :mod:`~keras_memnmt.rundir.layout`: the files a run holds (:data:`RUN_FILES`,
  :data:`WRITTEN_BY_TRAIN`, :data:`TRAIN_LOG`) and its config (:func:`read_config`,
  :func:`write_config`);
- :mod:`~keras_memnmt.rundir.prepare`: a training's run directory: an earlier run in it
  refused, removed or continued (:func:`prepare_run_dir`, :func:`remove_run_files`,
  :func:`not_a_run`), the resume check (:func:`check_resume`, :data:`RESUME_FIELDS`), a
  warm start's vocabulary (:func:`share_vocab`);
- :mod:`~keras_memnmt.rundir.lock`: one writer per run directory (:func:`lock_run_dir`,
  :class:`RunLockedError`, :data:`LOCK_FILE`);
- :mod:`~keras_memnmt.rundir.checkpoints`: a run's model files (:func:`checkpoint_path`,
  :func:`kept_checkpoints`, :func:`last_checkpoints`, :func:`read_model_file`,
  :class:`CheckpointError`) and their average (:func:`average_checkpoints`);
- :mod:`~keras_memnmt.rundir.loading`: a run's model, vocabulary and config
  (:func:`load_model`, :func:`load_run`), several runs as one
  :class:`~keras_memnmt.models.Ensemble` (:func:`load_ensemble`, :func:`check_ensemble`).

Loading a run needs the models and the data packages, never the training code. The
names these modules use from elsewhere (``ConfigError`` and ``TrainConfig`` of
:mod:`keras_memnmt.config`, ``RECORD_FILE`` and ``run_model_file`` of
:mod:`~keras_memnmt.rundir.records`, and the like) are reachable here too.
"""

from keras_memnmt.config import ConfigError as ConfigError
from keras_memnmt.config import TrainConfig as TrainConfig
from keras_memnmt.config import build_model as build_model
from keras_memnmt.config import resolved_corpus as resolved_corpus
from keras_memnmt.data import SubwordVocab as SubwordVocab
from keras_memnmt.data.vocab import vocabulary_maker as vocabulary_maker
from keras_memnmt.files import save_with as save_with
from keras_memnmt.files import write_json as write_json
from keras_memnmt.models import option_differences as option_differences
from keras_memnmt.rundir.checkpoints import (
    CHECKPOINT_NAME,
    CheckpointError,
    average_checkpoints,
    checkpoint_path,
    intact_alternatives,
    kept_checkpoints,
    last_checkpoints,
    read_model_file,
)
from keras_memnmt.rundir.checkpoints import _is_float as _is_float
from keras_memnmt.rundir.layout import (
    RUN_FILES,
    TRAIN_COMMAND,
    TRAIN_LOG,
    WRITTEN_BY_TRAIN,
    read_config,
    write_config,
)
from keras_memnmt.rundir.loading import _broken as _broken
from keras_memnmt.rundir.loading import _check_run_files as _check_run_files
from keras_memnmt.rundir.loading import _stderr as _stderr
from keras_memnmt.rundir.loading import (
    check_ensemble,
    check_same_vocab,
    load_ensemble,
    load_model,
    load_run,
)
from keras_memnmt.rundir.lock import LOCK_FILE, RunLockedError, lock_run_dir
from keras_memnmt.rundir.lock import _process_start as _process_start
from keras_memnmt.rundir.lock import _running as _running
from keras_memnmt.rundir.prepare import (
    RESUME_FIELDS,
    check_resume,
    not_a_run,
    prepare_run_dir,
    remove_run_files,
    share_vocab,
)
from keras_memnmt.rundir.records import RECORD_FILE as RECORD_FILE
from keras_memnmt.rundir.records import REQUIRED_CONFIG_FIELDS as REQUIRED_CONFIG_FIELDS
from keras_memnmt.rundir.records import is_record as is_record
from keras_memnmt.rundir.records import run_model_file as run_model_file

__all__ = [
    "CHECKPOINT_NAME",
    "LOCK_FILE",
    "RESUME_FIELDS",
    "RUN_FILES",
    "TRAIN_COMMAND",
    "TRAIN_LOG",
    "WRITTEN_BY_TRAIN",
    "CheckpointError",
    "RunLockedError",
    "average_checkpoints",
    "check_ensemble",
    "check_resume",
    "check_same_vocab",
    "checkpoint_path",
    "intact_alternatives",
    "kept_checkpoints",
    "last_checkpoints",
    "load_ensemble",
    "load_model",
    "load_run",
    "lock_run_dir",
    "not_a_run",
    "prepare_run_dir",
    "read_config",
    "read_model_file",
    "remove_run_files",
    "share_vocab",
    "write_config",
]
