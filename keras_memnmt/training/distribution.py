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

Several processes (hosts), on JAX: ``$KERAS_DISTRIBUTION_NUM_PROCESSES`` above 1 with
``data_parallel`` joins the cluster the environment names (:mod:`keras_memnmt.training.hosts`)
and trains over every process's devices. Each process builds the same global batches
(the same seed) and keeps its own rows of each (:meth:`Placement.local_rows`): Keras's
own sharding of a ``tf.data`` dataset (``DataParallel(auto_shard_dataset=True)``) needs
a batch size fixed in the dataset's shapes, which length-bucketed batches do not have;
its result, each process taking one contiguous slice of every batch, is the same.

On TensorFlow, several workers (``TF_CONFIG``) are refused: under
``tf.distribute.MultiWorkerMirroredStrategy`` (made at process start, as TensorFlow
requires) two local workers form their cluster, and Keras 3.15's ``fit`` then fails on
the first batch converting a ``PerReplica`` value. docs/scaling.md says what runs.
"""

from __future__ import annotations

import contextlib
import os

import keras

from keras_memnmt.config import ConfigError, TrainConfig
from keras_memnmt.data.vocab import PAD_ID
from keras_memnmt.runtime import split_tensorflow_cpu
from keras_memnmt.training import hosts


class Placement:
    """Where a run trains: its devices and the scope its model is built and trained in.

    Attributes:
        devices: the devices' names.
        scope: a context manager for building, loading, compiling and fitting the model.
        pad_to: every batch is padded to a multiple of this (1 = as it comes).
    """

    def __init__(self, devices: list[str], scope=None, pad_to: int = 1, process: int = 0, processes: int = 1):
        self.devices, self.pad_to = devices, pad_to
        self.process, self.processes = process, processes
        self._scope = scope

    @property
    def writer(self) -> bool:
        """Whether this process writes the run directory (process 0 of a run on several)."""
        return self.process == 0

    def on_writer(self, step):
        """``step()``'s result in the process that writes (``None`` in the others); on several
        processes the others wait for it and stop with it if it fails
        (:func:`keras_memnmt.training.hosts.on_writer`)."""
        if self.processes == 1:
            return step()
        return hosts.on_writer(self.writer, step)

    def local_rows(self, ds):
        """``ds``'s batches (padded to a multiple of ``pad_to`` rows), each cut to this
        process's contiguous share of its rows: the part of the global batch that its
        devices take."""
        if self.processes == 1:
            return ds
        import tensorflow as tf

        share, index = self.processes, self.process

        def cut(inputs, target_out):
            rows = tf.shape(target_out)[0] // share

            def part(x):
                return x[index * rows : (index + 1) * rows]

            return (part(inputs[0]), part(inputs[1])), part(target_out)

        return ds.map(cut)

    def scope(self):
        return self._scope() if self._scope is not None else contextlib.nullcontext()

    def describe(self, config: TrainConfig, learning_rate: float | None = None) -> str:
        """The log line: devices, global and per-device batch, learning rate (``learning_rate``:
        the optimizer's, e.g. a resumed run's decayed rate; default the config's) and, with
        ``warmup_steps``, the schedule (the rate at the first update is peak / warmup_steps)."""
        rate = config.learning_rate if learning_rate is None else learning_rate
        rate_text = f"learning rate {rate:g}"
        if config.warmup_steps:
            rate_text += (
                f" (a linear warm-up to {config.learning_rate:g} over {config.warmup_steps} updates, then 1/sqrt(step))"
            )
        unit = "sentences" if config.batch_by == "sentences" else "tokens"
        if config.distribution == "none":
            return f"distribution: none (the backend's default device); batch {config.batch_size} {unit}; {rate_text}"
        n = len(self.devices)
        hosts = f" in {self.processes} processes (this is process {self.process})" if self.processes > 1 else ""
        per = config.batch_size / n
        per_text = f"{per:g}" if per == int(per) else f"about {per:.1f}"
        return (
            f"distribution: {config.distribution} on {n} device{'s' if n > 1 else ''} "
            f"({', '.join(self.devices)}){hosts}; global batch {config.batch_size} {unit}, {per_text} per "
            f"device; {rate_text}"
        )


def placement(config: TrainConfig) -> Placement:
    """The devices and scope ``config.distribution`` asks for (call it before any model is built)."""
    backend = keras.backend.backend()
    processes = hosts.requested()
    if config.distribution == "none":
        if processes > 1:
            raise ConfigError(
                f"$KERAS_DISTRIBUTION_NUM_PROCESSES={processes} asks for a run on several "
                "processes: add --set distribution=data_parallel (docs/scaling.md)"
            )
        return Placement(["default"])
    if os.environ.get("TF_CONFIG"):
        raise ConfigError(
            "config field distribution='data_parallel' with $TF_CONFIG set: TensorFlow's "
            "several workers (MultiWorkerMirroredStrategy) fail in Keras's fit; several "
            'processes train on JAX (docs/scaling.md, "Several hosts"); unset $TF_CONFIG to '
            "train on this host's devices"
        )
    if processes > 1 and backend != "jax":
        raise ConfigError(
            f"$KERAS_DISTRIBUTION_NUM_PROCESSES={processes}: a run on several processes "
            f"needs KERAS_BACKEND=jax (JAX's distributed runtime), not {backend}"
        )
    if backend == "torch":
        raise ConfigError(
            "config field distribution='data_parallel' is not supported on the torch "
            "backend: Keras's model.fit on PyTorch trains on one device (torch.distributed "
            "needs a custom loop); use KERAS_BACKEND=tensorflow or jax"
        )
    if backend == "jax":
        return _jax_placement(*(hosts.join(processes) if processes > 1 else (0, 1)))
    return _tensorflow_placement()


def _jax_placement(process: int, processes: int) -> Placement:
    devices = keras.distribution.list_devices()  # every process's

    @contextlib.contextmanager
    def scope():  # the distribution is global in Keras's JAX trainer: set for this run only
        keras.distribution.set_distribution(
            keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False)
        )  # local_rows
        try:
            yield
        finally:
            keras.distribution.set_distribution(None)

    return Placement([str(d) for d in devices], scope=scope, pad_to=len(devices), process=process, processes=processes)


def _tensorflow_placement() -> Placement:
    import tensorflow as tf

    split_tensorflow_cpu()  # XLA_FLAGS' CPU device count, without a GPU (done already by `memnmt`)
    gpus = tf.config.list_logical_devices("GPU")
    devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
    strategy = tf.distribute.MirroredStrategy(devices)
    # Even slices: the replicas' sparse embedding gradients are summed with AddN, which
    # needs as many rows from each.
    return Placement(devices, scope=strategy.scope, pad_to=strategy.num_replicas_in_sync)


def save_model(model: keras.Model, path: str, optimizer: bool = True) -> None:
    """``model.save(path)`` with no Keras distribution set (JAX): Keras's saving builds a
    throwaway optimizer, whose variables a distribution over several processes places
    with a collective step that only the saving process joins (it would wait for the
    others forever). The saved values are the same. ``optimizer=False``: a file to
    translate with, without the optimizer's state and compile settings
    (:func:`strip_optimizer`)."""
    distribution = keras.distribution.distribution() if keras.backend.backend() == "jax" else None
    if distribution is not None:
        keras.distribution.set_distribution(None)
    try:
        model.save(path)
    finally:
        if distribution is not None:
            keras.distribution.set_distribution(distribution)
    if not optimizer:
        strip_optimizer(path)


def strip_optimizer(path: str) -> None:
    """The ``.keras`` file ``path`` rewritten without what only training reads: the
    optimizer's variables (Adam's two moments: twice the weights' size) and the compile
    settings. Keras 3's ``model.save`` has no option for it (``include_optimizer`` was
    Keras 2's), so the archive is written again: its ``model.weights.h5`` without the
    ``optimizer`` group, its ``config.json`` without ``compile_config``. It loads with
    ``compile=False``, as every inference load does; a resume reads ``model.keras``."""
    import json
    import zipfile

    import h5py

    with zipfile.ZipFile(path) as archive:
        entries = [(info, archive.read(info.filename)) for info in archive.infolist()]
    with zipfile.ZipFile(path, "w") as out:  # a temporary file of `save_with` while it is written
        for info, data in entries:
            if info.filename == "config.json":
                config = json.loads(data)
                config.pop("compile_config", None)
                data = json.dumps(config).encode("utf-8")
            elif info.filename == "model.weights.h5":
                data = _without_group(data, "optimizer", h5py)
            out.writestr(info, data)


def _without_group(h5: bytes, name: str, h5py) -> bytes:
    """The HDF5 file ``h5`` (bytes) without its top-level group ``name``."""
    import io

    source, target = io.BytesIO(h5), io.BytesIO()
    with h5py.File(source, "r") as f, h5py.File(target, "w") as g:
        for key, value in f.attrs.items():
            g.attrs[key] = value
        for key in f:
            if key != name:
                f.copy(f[key], g, name=key)
    return target.getvalue()


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
