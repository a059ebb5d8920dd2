"""The typed training config every recipe fills in; ``--set KEY=VALUE`` overrides a field.

``TrainConfig`` holds what every run has (data, optimization, schedule) plus the
model's name and its options. The options are not listed here: each model
declares them as its constructor's keyword arguments
(:func:`keras_memnmt.models.model_options`), and ``model_options`` holds the
ones a recipe or ``--set`` gives (the rest take the model's defaults).
``config.replace(...)`` and ``--set`` take config fields and options alike.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

from keras_memnmt.decoding.settings import LENGTH_PENALTIES
from keras_memnmt.models.base import FORMER_BASE_OPTIONS
from keras_memnmt.models.registry import get_model, model_names, model_options
from keras_memnmt.tokens import MAX_INT


class ConfigError(ValueError):
    """A recipe field or model option with a wrong name or value."""


@dataclasses.dataclass
class TrainConfig:
    # --- data ---
    # "multi30k", "synthetic", "files" (train_prefix, val_prefix and test_prefix: your own
    # corpus, nothing downloaded) or "auto" ("files" when all three prefixes are given, else
    # Multi30k if reachable, else synthetic).
    corpus: str = "auto"
    src: str = "en"  # source language (Multi30k's; the source files' suffix with a prefix below)
    tgt: str = "de"  # target language (Multi30k's; the target files' suffix with a prefix below)
    train_limit: int | None = None  # use only the first N training pairs (None = all)
    # Train on the pairs in the files {train_prefix}.{src} and {train_prefix}.{tgt} (plain, or
    # .gz when only that exists) instead of the corpus's train split; train_limit applies to
    # these pairs (None = the corpus's train split). A relative path is read from the folder
    # the command runs in.
    train_prefix: str | None = None
    # Validate on the pairs in {val_prefix}.{src} and {val_prefix}.{tgt} (plain or .gz)
    # instead of the corpus's val split; val_limit applies to them (None = the corpus's).
    val_prefix: str | None = None
    # Test on the pairs in {test_prefix}.{src} and {test_prefix}.{tgt} (plain or .gz) after
    # training, and in `memnmt evaluate` and `compare` by default, instead of the corpus's
    # test_split; the test set is named by the prefix's file name (None = test_split).
    test_prefix: str | None = None
    # A train_prefix corpus is streamed from its files (keras_memnmt.data.stream), not held in
    # memory: its vocabulary trains on its first vocab_sample pairs, and each epoch is shuffled
    # within consecutive blocks of shuffle_buffer pairs.
    vocab_sample: int = 200_000
    shuffle_buffer: int = 100_000
    val_limit: int | None = None  # validate on the first N val pairs (None = all)
    test_limit: int | None = None  # score only the first N test pairs after training (None = all)
    synthetic_size: int = 20000  # training pairs when corpus is synthetic
    vocab_size: int = 8000  # SentencePiece vocabulary size per side (soft limit)
    vocab_type: str = "unigram"  # "unigram" or "bpe"
    joint_vocab: bool = False  # one vocabulary for source and target
    # Train with this vocabulary (a `memnmt vocab build --out` folder, or a run's vocab/),
    # copied into the run as it is; vocab_size and vocab_type are then the folder's.
    vocab_dir: str | None = None
    max_length: int = 80  # drop training pairs longer than this many subword tokens (counted)
    batch_size: int = 64  # sentences per batch, or tokens per batch when batch_by == "tokens"
    batch_by: str = "sentences"  # "sentences" or "tokens"
    bucket_width: int = 8  # length-bucket width; batches are padded to the bucket boundary
    # --- model ---
    model: str = "rnnsearch"  # a registered model name (keras_memnmt.models.model_names())
    # The model's options (its constructor's keyword arguments, e.g. embedding_dim or
    # memory_size); an option not given takes the model's default.
    model_options: dict = dataclasses.field(default_factory=dict)
    pretrain_run: str | None = None  # warm start from this run dir (the model's warm_start decides what fits)
    pretrain_checkpoint: str | None = None  # that run's checkpoint (e.g. step3688; None = best.keras)
    # --- optimization ---
    optimizer: str = "adam"  # "adam" (FusedAdam) or "adadelta" (paper: eps 1e-6, rho 0.95)
    learning_rate: float = 1e-3  # Adam step size (Adadelta: 1.0)
    clipnorm: float = 1.0  # global gradient-norm clipping (paper: 1.0)
    adam_beta_2: float = 0.999  # Adam's second-moment decay (Keras's; Vaswani et al. 2017, §5.3: 0.98)
    adam_epsilon: float = 1e-7  # added to Adam's sqrt(v) (Keras's; Vaswani et al. 2017: 1e-9)
    label_smoothing: float = 0.0  # cross-entropy label smoothing
    lr_decay: float = 1.0  # multiply the learning rate by this on a validation plateau (1 = off)
    lr_patience: int = 1  # validations without a BLEU gain before the rate decays
    min_lr: float = 0.0  # the decay stops here
    # > 0: the rate rises linearly to learning_rate over this many updates, then falls as
    # 1/sqrt(step) (Vaswani et al. 2017, §5.3); needs lr_decay = 1. 0 = a constant rate.
    warmup_steps: int = 0
    jit_compile: bool | None = None  # XLA-compile the train step (None = Keras's "auto")
    # "data_parallel": one replica per local device, each taking a slice of every batch
    # (TensorFlow MirroredStrategy, JAX keras.distribution.DataParallel; not PyTorch);
    # batch_size stays the global batch. "none": the backend's default device.
    distribution: str = "none"
    # Keras dtype policy: "float32", "mixed_float16" (with dynamic loss scaling) or
    # "mixed_bfloat16"; mixed keeps the weights in float32 (docs/reliability.md)
    precision: str = "float32"
    epochs: int = 10  # passes over the training data
    max_steps: int | None = None  # stop after this many updates (None = epochs decide)
    validate_every: int = 0  # validate every N steps (0 = once per epoch)
    patience: int = 3  # stop after this many validations without a BLEU gain (0 = never)
    # Stop with an error when the running training loss exceeds this (a per-token
    # cross-entropy starts near ln(vocabulary size), about 9); a non-finite loss always
    # stops. None = no threshold.
    max_loss: float | None = 100.0
    keep_checkpoints: bool = False  # also keep checkpoints/step{N}.keras at every validation
    # --- TensorBoard (OUT/tensorboard; docs/monitoring.md) ---
    log_every: int = 50  # TensorBoard's training scalars, and a log line (stderr not a terminal), every N steps
    val_loss_sentences: int = 512  # teacher-forced validation loss on the first N val pairs (0 = off)
    tensorboard_pictures: int = 2  # attention / memory pictures of N fixed val pairs per validation
    # --- test and seed ---
    beam_size: int = 5  # beam for the final test evaluation
    # The final test's length penalty: "gnmt" ((5+|Y|)/6)^alpha, "average" (|Y|: fairseq's
    # --lenpen 1) or "none"; memnmt translate and evaluate on the run use it unless given.
    length_penalty: str = "gnmt"
    alpha: float = 0.6  # the GNMT length-penalty exponent
    test_split: str = "test_2016_flickr"  # split scored after training (Multi30k)
    seed: int = 0  # shuffle and initialization seed

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not fields: the model's options, read as
        # attributes (config.memory_size), with the model's default when not given.
        if name.startswith("_") or name in ("model", "model_options"):
            raise AttributeError(name)
        options = self.__dict__.get("model_options", {})
        if name in options:
            return options[name]
        try:
            option = model_options(get_model(self.__dict__.get("model", "rnnsearch"))).get(name)
        except ValueError:
            option = None
        if option is None:
            raise AttributeError(
                f"TrainConfig has no field {name!r} and model {self.__dict__.get('model')!r} no option {name!r}"
            )
        return option.default

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with ``changes``: config fields and the model's options by name.

        Changing ``model`` keeps the options the new model also has and drops the
        others; an option the (new) model does not have is a :class:`ConfigError`
        naming the option and the model.
        """
        return validate(_replace(self, changes))

    def init_options(self) -> dict:
        """The options the model's constructor takes (``model_options`` without warm-start ones)."""
        return self._options(warm_start=False)

    def warm_start_options(self) -> dict:
        """The options of the model's ``warm_start`` given in ``model_options``."""
        return self._options(warm_start=True)

    def _options(self, warm_start: bool) -> dict:
        declared = model_options(get_model(self.model))
        return {k: v for k, v in self.model_options.items() if declared[k].warm_start == warm_start}

    def test_search(self) -> dict:
        """The final test's search, as keyword arguments of ``translate`` and
        ``export_translator``: ``{"beam_size", "length_penalty", "alpha"}``."""
        return {"beam_size": self.beam_size, "length_penalty": self.length_penalty, "alpha": self.alpha}

    def to_dict(self) -> dict:
        """A JSON-ready dict (what a run directory's config.json holds)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: dict, source: str = "config") -> TrainConfig:
        """A config from :meth:`to_dict`'s output, or from the flat form of older run
        directories (one field per model option): a key that is neither a field nor an
        option of the model is dropped (it described how that run was staged), and so is
        a former base option that the model does not take (``FORMER_BASE_OPTIONS``: it had
        no effect)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in raw.items() if k in fields}
        model = known.get("model", cls.model)
        try:
            model_cls = get_model(model)
        except ValueError as e:
            raise ConfigError(f"{source}: {e}") from None
        declared = model_options(model_cls)
        options = {k: v for k, v in raw.items() if k not in fields and k in declared}
        stored = {
            k: v
            for k, v in dict(known.get("model_options") or {}).items()
            if k in declared or k not in FORMER_BASE_OPTIONS
        }
        known["model_options"] = {**options, **stored}
        return validate(cls(**known))


def _replace(config: TrainConfig, changes: dict) -> TrainConfig:
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    changes = dict(changes)
    options = dict(changes.pop("model_options", config.model_options))
    model = changes.get("model", config.model)
    if model != config.model:
        try:
            declared = model_options(get_model(model))
        except ValueError:
            declared = {}  # validate names the bad model
        options = {k: v for k, v in options.items() if k in declared}
    for key in [k for k in changes if k not in fields]:
        options[key] = changes.pop(key)
    return dataclasses.replace(config, **changes, model_options=options)


def convert(name: str, text: str, annotation: Any) -> Any:
    """Parses the ``--set`` value ``text`` as the type ``annotation`` of field or option ``name``."""
    args = typing.get_args(annotation)
    if type(None) in args:  # Optional[X]
        if text.lower() in ("none", "null", ""):
            return None
        annotation = next(a for a in args if a is not type(None))
    if annotation is Any:
        return text
    try:
        if annotation is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        return annotation(text)
    except ValueError:
        raise ConfigError(f"--set {name}={text}: expected {annotation.__name__}") from None


def parse_overrides(overrides: list[str]) -> list[tuple[str, str]]:
    """``KEY=VALUE`` strings as ``(key, value)`` pairs; a :class:`ConfigError` for any other form."""
    pairs = []
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        pairs.append((key.strip(), value.strip()))
    return pairs


def apply_overrides(config: TrainConfig, overrides: list[str]) -> TrainConfig:
    """Applies ``KEY=VALUE`` strings (config fields and the model's options);
    unknown keys and bad values are :class:`ConfigError`."""
    hints = typing.get_type_hints(TrainConfig)
    pairs = parse_overrides(overrides)
    changes: dict[str, Any] = {}
    for key, value in pairs:  # the model first: the options below are the new model's
        if key == "model":
            changes["model"] = convert(key, value, hints["model"])
            validate_model_name(changes["model"])
    declared = model_options(get_model(changes.get("model", config.model)))
    for key, value in pairs:
        if key == "model":
            continue
        if key in hints and key != "model_options":
            changes[key] = convert(key, value, hints[key])
        elif key in declared:
            changes[key] = convert(key, value, declared[key].annotation)
        else:
            model = changes.get("model", config.model)
            raise ConfigError(
                f"--set {key}: no such config field, and model {model!r} has no such option; "
                f"fields are: {', '.join(h for h in hints if h != 'model_options')}; "
                f"{model} options are: {', '.join(declared)}"
            )
    return validate(_replace(config, changes))


def validate_model_name(name: str) -> None:
    if name not in model_names():
        raise ConfigError(f"config field model={name!r}: expected one of {model_names()}")


def _type_ok(value: Any, hint: Any) -> bool:
    allowed = tuple(typing.get_args(hint) or (hint,))
    if Any in allowed:
        return True
    allowed = tuple(typing.get_origin(a) or a for a in allowed)
    if float in allowed:
        allowed = allowed + (int,)
    if isinstance(value, bool) and bool not in allowed:
        return False
    return isinstance(value, allowed)


# The prefixes of a corpus given as files: corpus "files" needs all three.
FILE_FIELDS = ("train_prefix", "val_prefix", "test_prefix")


def validate(config: TrainConfig) -> TrainConfig:
    """Checks field types and choices, and the model's options (by building the model
    once, without weights: its own argument checks speak); returns the config unchanged."""
    hints = typing.get_type_hints(TrainConfig)
    for f in dataclasses.fields(config):
        value, hint = getattr(config, f.name), hints[f.name]
        if not _type_ok(value, hint):
            raise ConfigError(f"config field {f.name}={value!r}: expected {hint}")
    validate_model_name(config.model)
    choices = {
        "corpus": ("auto", "multi30k", "synthetic", "files"),
        "optimizer": ("adam", "adadelta"),
        "batch_by": ("sentences", "tokens"),
        "vocab_type": ("unigram", "bpe"),
        "distribution": ("none", "data_parallel"),
        "precision": ("float32", "mixed_float16", "mixed_bfloat16"),
        "length_penalty": LENGTH_PENALTIES,
    }
    for name, options in choices.items():
        if getattr(config, name) not in options:
            raise ConfigError(f"config field {name}={getattr(config, name)!r}: expected one of {options}")
    _check_ranges(config)
    if config.warmup_steps and config.lr_decay < 1.0:
        raise ConfigError(
            f"config fields warmup_steps={config.warmup_steps} and lr_decay={config.lr_decay}: "
            "the schedule and the plateau decay would both set the rate; "
            "set lr_decay=1 or warmup_steps=0"
        )
    missing = [f for f in FILE_FIELDS if getattr(config, f) is None]
    if config.corpus == "files" and missing:
        raise ConfigError(
            f"config field corpus='files' needs {', '.join(missing)} (the prefixes of "
            "your own training, validation and test files)"
        )
    if config.pretrain_checkpoint is not None and config.pretrain_run is None:
        raise ConfigError(
            f"config field pretrain_checkpoint={config.pretrain_checkpoint!r} "
            "needs pretrain_run (the run directory that holds it)"
        )
    cls = get_model(config.model)
    declared = model_options(cls)
    for name, value in config.model_options.items():
        if name not in declared:
            raise ConfigError(f"model {config.model!r} has no option {name!r}; its options are: {', '.join(declared)}")
        if not _type_ok(value, declared[name].annotation):
            raise ConfigError(f"model {config.model!r} option {name}={value!r}: expected {declared[name].annotation}")
        if _too_large(value, declared[name].annotation):
            raise ConfigError(f"model {config.model!r} option {name}={value!r}: expected an int <= {MAX_INT}")
        if _not_finite(value, declared[name].annotation):
            raise ConfigError(f"model {config.model!r} option {name}={value!r}: expected a finite number")
    try:
        cls(8, 8, **config.init_options())  # no weights are made: the model's own checks
    except (ValueError, TypeError) as e:
        raise ConfigError(f"model {config.model!r}: {e}") from None
    return config


# MAX_INT (keras_memnmt.tokens) is the largest int a config field or a model option may
# hold: TensorFlow's shapes, SentencePiece's vocabulary size and NumPy's and the backends'
# seeds hold 32 bits, and a larger value fails deep inside them (tf.data, NumPy) instead of
# here, by name.


def resolved_corpus(config: TrainConfig) -> str:
    """The corpus a run of ``config`` reads: ``"files"`` when all three of
    ``train_prefix``, ``val_prefix`` and ``test_prefix`` are given (nothing else is read,
    whatever ``corpus`` says), else ``config.corpus`` (``"auto"`` is resolved when the
    data are loaded: Multi30k if it is there, else the synthetic corpus)."""
    if config.train_prefix and config.val_prefix and config.test_prefix:
        return "files"
    return config.corpus


def _too_large(value: Any, hint: Any) -> bool:
    """Whether ``value`` of a field or option typed ``hint`` is an int above ``MAX_INT`` (a
    float field may hold more)."""
    return (
        int in (typing.get_args(hint) or (hint,))
        and isinstance(value, int)
        and not isinstance(value, bool)
        and value > MAX_INT
    )


def _not_finite(value: Any, hint: Any) -> bool:
    """Whether ``value`` of a field or option typed ``hint`` (a float) is infinite or NaN."""
    return float in (typing.get_args(hint) or (hint,)) and isinstance(value, float) and not math.isfinite(value)


# Every number's range, checked before any work starts: (fields, test, what is expected).
_RANGES = (
    (
        (
            "batch_size",
            "bucket_width",
            "epochs",
            "log_every",
            "lr_patience",
            "max_length",
            "synthetic_size",
            "beam_size",
            "vocab_sample",
            "shuffle_buffer",
        ),
        lambda v: v >= 1,
        "an int >= 1",
    ),
    (("vocab_size",), lambda v: v >= 8, "an int >= 8"),  # 4 reserved ids and a few pieces
    (("train_limit", "val_limit", "test_limit", "max_steps"), lambda v: v is None or v >= 1, "an int >= 1, or None"),
    (
        ("validate_every", "patience", "warmup_steps", "val_loss_sentences", "tensorboard_pictures", "seed"),
        lambda v: v >= 0,
        "an int >= 0",
    ),
    (
        ("learning_rate", "min_lr"),
        lambda v: math.isfinite(v) and v >= 0.0,
        "a finite number >= 0 (learning_rate 0 freezes the weights)",
    ),
    (("clipnorm",), lambda v: math.isfinite(v) and v >= 0.0, "a finite number >= 0 (0 = no clipping)"),
    (("label_smoothing",), lambda v: 0.0 <= v < 1.0, "a number in [0, 1)"),
    (("alpha",), lambda v: math.isfinite(v) and v >= 0.0, "a finite number >= 0"),
    (("adam_beta_2",), lambda v: 0.0 <= v < 1.0, "a number in [0, 1)"),
    (("adam_epsilon",), lambda v: math.isfinite(v) and v > 0.0, "a finite number > 0"),
    (("lr_decay",), lambda v: 0.0 < v <= 1.0, "a factor in (0, 1]"),
    (("max_loss",), lambda v: v is None or (math.isfinite(v) and v > 0.0), "a finite number > 0, or None"),
)


def _check_ranges(config: TrainConfig) -> None:
    hints = typing.get_type_hints(TrainConfig)
    for f in dataclasses.fields(config):  # every int field, at most MAX_INT
        if _too_large(getattr(config, f.name), hints[f.name]):
            raise ConfigError(f"config field {f.name}={getattr(config, f.name)!r}: expected an int <= {MAX_INT}")
    for names, ok, expected in _RANGES:
        for name in names:
            value = getattr(config, name)
            if not ok(value):
                raise ConfigError(f"config field {name}={value!r}: expected {expected}")
    for f in dataclasses.fields(config):  # every float field, finite (a field without a range too)
        if _not_finite(getattr(config, f.name), hints[f.name]):
            raise ConfigError(f"config field {f.name}={getattr(config, f.name)!r}: expected a finite number")


def build_model(config: TrainConfig, source_vocab_size: int, target_vocab_size: int):
    """The model ``config`` names, with its options, for the given vocabulary sizes."""
    return get_model(config.model)(source_vocab_size, target_vocab_size, **config.init_options())
