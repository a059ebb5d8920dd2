"""A run's settings: the typed training config, and the reference of every setting.

- :mod:`~keras_memnmt.config.train`: :class:`TrainConfig`, the typed config every recipe
  fills in, its checks, and ``--set KEY=VALUE`` overrides (every name of that module
  listed below is reachable here);
- :mod:`~keras_memnmt.config.reference`: the reference of every config field and model
  option, rendered by ``memnmt train RECIPE --show-config`` and in ``docs/config.md``.
"""

from keras_memnmt.config.train import (
    FILE_FIELDS,
    MAX_INT,
    ConfigError,
    TrainConfig,
    apply_overrides,
    build_model,
    convert,
    parse_overrides,
    resolved_corpus,
    validate,
    validate_model_name,
)

__all__ = [
    "FILE_FIELDS",
    "MAX_INT",
    "ConfigError",
    "TrainConfig",
    "apply_overrides",
    "build_model",
    "convert",
    "parse_overrides",
    "resolved_corpus",
    "validate",
    "validate_model_name",
]
