"""Data-parallel training on all local devices through each engine's own mechanism.

``distribution="data_parallel"`` (config field) trains one model replicated on every
local device, each device taking a slice of every batch (``batch_size`` stays the
global batch):

- TensorFlow: ``tf.distribute.MirroredStrategy`` over the GPUs, else over the logical
  CPU devices. The model is built, compiled and trained inside its scope. Without a GPU,
  ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` splits the CPU into N logical
  devices (:func:`keras_memnmt.runtime.split_tensorflow_cpu`), as that flag makes N CPU
  devices on JAX. TensorFlow allows the split only before its devices are set up (the
  process's first op); the `memnmt` command makes it as it imports TensorFlow, and a
  Python caller whose process has already run TensorFlow with another device count gets
  a one-line ``ValueError`` naming ``XLA_FLAGS``.
- JAX: ``keras.distribution.DataParallel`` over ``keras.distribution.list_devices()``
  (``XLA_FLAGS=--xla_force_host_platform_device_count=N`` makes N CPU devices), set for
  the run only.
- On both, the batch dimension must divide among the devices: :func:`pad_batches` pads
  each batch with empty pairs, which every loss ignores.
- PyTorch: Keras 3's ``model.fit`` on PyTorch runs on one device; data parallelism
  there means ``torch.distributed`` around a custom loop, which this library does not
  have. ``data_parallel`` is refused on that backend with that reason.

What the replicas compute, against one device on the same global batch: JAX runs the
one-device program sharded; on TensorFlow the loss divides by the whole batch's target
tokens (``training.losses``) and the optimizer sums the replicas' gradients before their
norm and clipping (``training.optimizers``). Both give one device's losses up to float
reordering (``tests/test_distribution.py``). The Y-LSTM's encoder language-model loss
(``add_loss``) is on TensorFlow the mean of the replicas' token averages.

Several hosts (``TF_CONFIG``, ``KERAS_DISTRIBUTION_NUM_PROCESSES``) are refused: under
``tf.distribute.MultiWorkerMirroredStrategy`` (made at process start, as TensorFlow
requires) two local workers form their cluster, and Keras 3.15's ``fit`` then fails on
the first batch converting a ``PerReplica`` value; a JAX multi-process run was not
verified here. README, "Scaling out", says what runs.
"""

from __future__ import annotations

import contextlib
import os

import keras

from keras_memnmt.config import ConfigError, TrainConfig
from keras_memnmt.data.vocab import PAD_ID
from keras_memnmt.runtime import split_tensorflow_cpu


class Placement:
    """Where a run trains: its devices and the scope its model is built and trained in.

    Attributes:
        devices: the devices' names.
        scope: a context manager for building, loading, compiling and fitting the model.
        pad_to: every batch is padded to a multiple of this (1 = as it comes).
    """

    def __init__(self, devices: list[str], scope=None, pad_to: int = 1):
        self.devices, self.pad_to = devices, pad_to
        self._scope = scope

    def scope(self):
        return self._scope() if self._scope is not None else contextlib.nullcontext()

    def describe(self, config: TrainConfig, learning_rate: float | None = None) -> str:
        """The log line: devices, global and per-device batch, learning rate (``learning_rate``:
        the optimizer's, e.g. a resumed run's decayed rate; default the config's)."""
        rate = config.learning_rate if learning_rate is None else learning_rate
        unit = "sentences" if config.batch_by == "sentences" else "tokens"
        if config.distribution == "none":
            return (f"distribution: none (the backend's default device); batch {config.batch_size} {unit}; "
                    f"learning rate {rate:g}")
        n = len(self.devices)
        per = config.batch_size / n
        per_text = f"{per:g}" if per == int(per) else f"about {per:.1f}"
        return (f"distribution: {config.distribution} on {n} device{'s' if n > 1 else ''} "
                f"({', '.join(self.devices)}); global batch {config.batch_size} {unit}, {per_text} per "
                f"device; learning rate {rate:g}")


def placement(config: TrainConfig) -> Placement:
    """The devices and scope ``config.distribution`` asks for (call it before any model is built)."""
    backend = keras.backend.backend()
    if config.distribution == "none":
        return Placement(["default"])
    hosts = [v for v in ("TF_CONFIG", "KERAS_DISTRIBUTION_NUM_PROCESSES") if os.environ.get(v)]
    if hosts:
        raise ConfigError(f"config field distribution='data_parallel' with ${hosts[0]} set: training "
                          "across several hosts is not supported (README, \"Scaling out\"); unset it to "
                          "train on this host's devices")
    if backend == "torch":
        raise ConfigError("config field distribution='data_parallel' is not supported on the torch "
                          "backend: Keras's model.fit on PyTorch trains on one device (torch.distributed "
                          "needs a custom loop); use KERAS_BACKEND=tensorflow or jax")
    if backend == "jax":
        return _jax_placement()
    return _tensorflow_placement()


def _jax_placement() -> Placement:
    devices = keras.distribution.list_devices()

    @contextlib.contextmanager
    def scope():  # the distribution is global in Keras's JAX trainer: set for this run only
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
        try:
            yield
        finally:
            keras.distribution.set_distribution(None)

    return Placement([str(d) for d in devices], scope=scope, pad_to=len(devices))


def _tensorflow_placement() -> Placement:
    import tensorflow as tf

    split_tensorflow_cpu()  # XLA_FLAGS' CPU device count, without a GPU (done already by `memnmt`)
    gpus = tf.config.list_logical_devices("GPU")
    devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
    strategy = tf.distribute.MirroredStrategy(devices)
    # Even slices: the replicas' sparse embedding gradients are summed with AddN, which
    # needs as many rows from each.
    return Placement(devices, scope=strategy.scope, pad_to=strategy.num_replicas_in_sync)


def pad_batches(ds, multiple: int):
    """``ds`` (``((source, target_in), target_out)`` batches) with every batch padded to a
    multiple of ``multiple`` rows by pairs that are all padding. The losses average over
    non-pad target (and, for the Y-LSTM's language model, source) tokens, and attention
    gives an all-pad source zero weight, so the padded batch trains like the batch itself."""
    if multiple <= 1:
        return ds
    import tensorflow as tf

    def pad(inputs, target_out):
        source, target_in = inputs
        extra = (-tf.shape(source)[0]) % multiple

        def rows(x):
            return tf.concat([x, tf.fill(tf.stack([extra, tf.shape(x)[1]]), tf.cast(PAD_ID, x.dtype))], 0)

        return (rows(source), rows(target_in)), rows(target_out)

    return ds.map(pad, num_parallel_calls=tf.data.AUTOTUNE)
