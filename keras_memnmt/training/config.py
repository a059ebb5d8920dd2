"""The typed training config every recipe fills in; ``--set KEY=VALUE`` overrides a field."""

from __future__ import annotations

import dataclasses
import typing


class ConfigError(ValueError):
    """A recipe field with a wrong name or a value of the wrong type."""


@dataclasses.dataclass
class TrainConfig:
    # --- data ---
    corpus: str = "auto"  # "multi30k", "synthetic", or "auto" (Multi30k if reachable, else synthetic)
    src: str = "en"  # source language (Multi30k)
    tgt: str = "de"  # target language (Multi30k)
    train_limit: int | None = None  # use only the first N training pairs (None = all)
    val_limit: int | None = None  # validate on the first N val pairs (None = all)
    test_limit: int | None = None  # score only the first N test pairs after training (None = all)
    synthetic_size: int = 20000  # training pairs when corpus is synthetic
    vocab_size: int = 8000  # SentencePiece vocabulary size per side (soft limit)
    vocab_type: str = "unigram"  # "unigram" or "bpe"
    joint_vocab: bool = False  # one vocabulary for source and target
    max_length: int = 80  # drop training pairs longer than this many subword tokens (counted)
    batch_size: int = 64  # sentences per batch, or tokens per batch when batch_by == "tokens"
    batch_by: str = "sentences"  # "sentences" or "tokens"
    bucket_width: int = 8  # length-bucket width; batches are padded to the bucket boundary
    # --- model ---
    model: str = "rnnsearch"  # architecture: "rnnsearch", "cho" or "memdec"
    embedding_dim: int = 256  # source and target embedding size
    encoder_units: int = 256  # GRU units per encoder direction
    decoder_units: int = 512  # decoder state size
    attention_units: int = 512  # additive attention hidden size (rnnsearch)
    readout_units: int = 256  # deep-output layer size
    feedback_attention: bool = True  # query attention with s~ (MemDec §2.1) instead of s_{t-1}
    memory_size: int = 8  # MemDec: memory cells n (paper Table 2 studies 4..12)
    memory_dim: int | None = None  # MemDec: cell size m (None = decoder_units, as in the paper)
    address_units: int | None = None  # MemDec Eq. 12: addressing hidden size (None = attention_units)
    address_nonlinearity: str = "tanh"  # MemDec Eq. 12: "tanh" (default) or "none" (as printed)
    addressing: str | None = None  # MemDec §3.2: "shared_weights" (None), "shared_parameters", "separate"
    shared_addressing: bool | None = None  # MemDec, legacy name: True = shared_parameters, False = separate
    init_noise_std: float = 0.1  # MemDec Eq. 14: std of the memory-initialization noise
    init_noise: str = "fixed"  # MemDec Eq. 14: "fixed" (drawn once) or "sample" (per sentence)
    query_state: bool = False  # MemDec Eq. 5 plus W^s s_{t-1} (our addition: a lossless warm start)
    pretrain_run: str | None = None  # warm start from this run dir (MemDec: an RNNsearch run; else same model)
    pretrain_checkpoint: str | None = None  # that run's checkpoint (e.g. step3688; None = best.keras)
    pretrain_epochs: int = 0  # MemDec: first train RNNsearch this many epochs (0 = none)
    pretrain_learning_rate: float | None = None  # MemDec: that RNNsearch stage's rate (None = learning_rate)
    warm_start_new: str = "zeros"  # MemDec warm start: GRU rows of r and W^r "zeros" or "initializer"
    dropout: float = 0.0  # embedding dropout
    output_dropout: float = 0.5  # dropout on the deep output (paper: 0.5)
    annotation_dropout: float = 0.0  # dropout on the encoder annotations h_j (nmtpytorch's dropout_ctx)
    attention_remat: bool = True  # recompute the attention tanh in the backward pass (less memory)
    tie_embeddings: bool = False  # output kernel = target embedding (needs readout_units == embedding_dim)
    # --- optimization ---
    optimizer: str = "adam"  # "adam" (FusedAdam) or "adadelta" (paper: eps 1e-6, rho 0.95)
    learning_rate: float = 1e-3  # Adam step size (Adadelta: 1.0)
    clipnorm: float = 1.0  # global gradient-norm clipping (paper: 1.0)
    label_smoothing: float = 0.0  # cross-entropy label smoothing
    lr_decay: float = 1.0  # multiply the learning rate by this on a validation plateau (1 = off)
    lr_patience: int = 1  # validations without a BLEU gain before the rate decays
    min_lr: float = 0.0  # the decay stops here
    jit_compile: bool | None = None  # XLA-compile the train step (None = Keras's "auto")
    epochs: int = 10  # passes over the training data
    max_steps: int | None = None  # stop after this many updates (None = epochs decide)
    validate_every: int = 0  # validate every N steps (0 = once per epoch)
    patience: int = 3  # stop after this many validations without a BLEU gain
    keep_checkpoints: bool = False  # also keep checkpoints/step{N}.keras at every validation
    beam_size: int = 5  # beam for the final test evaluation
    test_split: str = "test_2016_flickr"  # split scored after training (Multi30k)
    seed: int = 0  # shuffle and initialization seed


def _convert(name: str, text: str, annotation) -> typing.Any:
    """Parses ``text`` as the type of field ``name``."""
    args = typing.get_args(annotation)
    if type(None) in args:  # Optional[X]
        if text.lower() in ("none", "null", ""):
            return None
        annotation = next(a for a in args if a is not type(None))
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


def apply_overrides(config: TrainConfig, overrides: list[str]) -> TrainConfig:
    """Applies ``KEY=VALUE`` strings; unknown keys and bad values are :class:`ConfigError`."""
    hints = typing.get_type_hints(TrainConfig)
    changes = {}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        key = key.strip()
        if key not in hints:
            raise ConfigError(f"--set {key}: no such config field; fields are: {', '.join(hints)}")
        changes[key] = _convert(key, value.strip(), hints[key])
    return validate(dataclasses.replace(config, **changes))


def validate(config: TrainConfig) -> TrainConfig:
    """Checks field types and choices; returns the config unchanged."""
    hints = typing.get_type_hints(TrainConfig)
    for f in dataclasses.fields(config):
        value, hint = getattr(config, f.name), hints[f.name]
        allowed = tuple(a for a in (typing.get_args(hint) or (hint,)))
        if hint is float:
            allowed = (float, int)
        if isinstance(value, bool) and bool not in allowed:
            allowed = ()
        if not isinstance(value, allowed):
            raise ConfigError(f"config field {f.name}={value!r}: expected {hint}")
    choices = {"corpus": ("auto", "multi30k", "synthetic"), "model": ("rnnsearch", "cho", "memdec"),
               "optimizer": ("adam", "adadelta"), "batch_by": ("sentences", "tokens"),
               "vocab_type": ("unigram", "bpe"), "address_nonlinearity": ("tanh", "none"),
               "init_noise": ("fixed", "sample"), "warm_start_new": ("zeros", "initializer"),
               "addressing": (None, "shared_weights", "shared_parameters", "separate")}
    for name, options in choices.items():
        if getattr(config, name) not in options:
            raise ConfigError(f"config field {name}={getattr(config, name)!r}: expected one of {options}")
    for name in ("learning_rate", "pretrain_learning_rate"):
        value = getattr(config, name)
        if value is not None and not value >= 0.0:  # 0 freezes the weights (tests use it)
            raise ConfigError(f"config field {name}={value!r}: expected a number >= 0")
    for name in ("dropout", "output_dropout", "annotation_dropout"):
        if not 0.0 <= getattr(config, name) < 1.0:
            raise ConfigError(f"config field {name}={getattr(config, name)!r}: expected a rate in [0, 1)")
    if not 0.0 < config.lr_decay <= 1.0:
        raise ConfigError(f"config field lr_decay={config.lr_decay!r}: expected a factor in (0, 1]")
    if config.pretrain_checkpoint is not None and config.pretrain_run is None:
        raise ConfigError(f"config field pretrain_checkpoint={config.pretrain_checkpoint!r} "
                          "needs pretrain_run (the run directory that holds it)")
    if config.model != "memdec" and (config.pretrain_epochs or config.pretrain_learning_rate is not None):
        raise ConfigError(f"config fields pretrain_epochs={config.pretrain_epochs!r} and pretrain_learning_rate="
                          f"{config.pretrain_learning_rate!r} train MemDec's RNNsearch stage; model="
                          f"{config.model!r} has none (to warm-start it, give pretrain_run)")
    if config.addressing is not None and config.shared_addressing is not None:
        raise ConfigError(f"config fields addressing={config.addressing!r} and shared_addressing="
                          f"{config.shared_addressing!r}: give addressing only (shared_addressing is "
                          "its legacy name)")
    if config.tie_embeddings and config.readout_units != config.embedding_dim:
        raise ConfigError(f"config field tie_embeddings=True needs readout_units == embedding_dim, got "
                          f"readout_units={config.readout_units}, embedding_dim={config.embedding_dim}")
    if config.lr_patience < 1:
        raise ConfigError(f"config field lr_patience={config.lr_patience!r}: expected an int >= 1")
    return config
