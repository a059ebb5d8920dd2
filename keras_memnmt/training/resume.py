"""What a run needs to continue exactly, stored inside the ``model.keras`` it continues from.

Keras saves the weights and the optimizer state, not the state of the random-number
generators (``keras.random.SeedGenerator``: every dropout mask and noise draw of the
models comes from one; on PyTorch an unseeded one draws from PyTorch's global
generator) — a loaded model redraws them from the global seed. So each
model file a validation writes also holds ``memnmt_resume.json`` (a zip entry beside
Keras's own, which Keras's loader ignores): the training step it was saved at, the
state of every seed generator of the model, in ``model.variables`` order, on
PyTorch the global generator's state, the epoch's running metric means (the logged
loss averages the epoch's steps so far), and the validations up to this one. Being inside
the file, it is renamed into place with the weights (:mod:`keras_memnmt.files`): the
weights, the step and the generators always belong together.

With the data order of every epoch fixed by ``(seed, epoch)``
(``make_dataset(first_epoch=...)``), a run resumed from such a file sees the same
batches and draws the same masks as the run that was not interrupted. The validations
inside the file let a run killed after its ``model.keras`` was written but before the
validation's other files (``checkpoints/``, ``best.keras``, ``validations.json``) complete
that validation when it is resumed (``keras_memnmt.training.trainer``).
"""

from __future__ import annotations

import base64
import json
import zipfile

import keras

from keras_memnmt.files import save_with
from keras_memnmt.training.distribution import save_model

STATE_ENTRY = "memnmt_resume.json"


def _seed_states(model: keras.Model) -> list:
    return [v for v in model.variables if v.path.endswith("seed_generator_state")]


def _torch_rng(state: str | None = None) -> str | None:
    """PyTorch's global generator state (base64), or sets it from ``state``. Keras's
    PyTorch dropout draws from it whenever its ``SeedGenerator`` was made without a
    seed (the models' default) instead of from the generator's own state."""
    if keras.backend.backend() != "torch":
        return None
    import torch

    if state is not None:
        torch.set_rng_state(torch.frombuffer(bytearray(base64.b64decode(state)), dtype=torch.uint8))
        return state
    return base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode("ascii")


def _metric_states(model: keras.Model) -> list | None:
    """The values of the model's metric variables (the epoch's running loss mean); ``None``
    under a TensorFlow distribution strategy, where each replica keeps a share of them
    (summed when read), which one value could not give back to the replicas."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        if tf.distribute.has_strategy():
            return None
    return [keras.ops.convert_to_numpy(v.value).tolist() for v in model.metrics_variables]


def restore_metrics(model: keras.Model, state: dict) -> bool:
    """Sets the model's metric variables to the saved values; False (nothing set) where the
    file holds none or another number of them."""
    variables, saved = model.metrics_variables, state.get("metrics") or []
    if len(variables) != len(saved):
        return False
    for variable, value in zip(variables, saved, strict=True):
        variable.assign(keras.ops.convert_to_tensor(value, dtype=variable.dtype))
    return True


def save_resumable(model: keras.Model, path: str, step: int, validations: list | None = None) -> None:
    """``model.save(path)``, written whole (a temporary file renamed into place), with the
    step, the random generators' states and the validations so far (``validations``,
    what ``validations.json`` will hold once this validation's files are all written)
    inside."""
    state = {
        "step": int(step),
        "validations": validations,
        "metrics": _metric_states(model),
        "seed_generators": [keras.ops.convert_to_numpy(v.value).tolist() for v in _seed_states(model)],
        "torch_rng": _torch_rng(),
    }

    def save(tmp: str) -> None:
        save_model(model, tmp)
        with zipfile.ZipFile(tmp, "a") as archive:
            archive.writestr(STATE_ENTRY, json.dumps(state))

    save_with(save, path)


def read_state(path: str) -> dict | None:
    """The state :func:`save_resumable` stored in ``path``; ``None`` for a model file
    written otherwise (older runs, ``memnmt average``)."""
    with zipfile.ZipFile(path) as archive:
        if STATE_ENTRY not in archive.namelist():
            return None
        return json.loads(archive.read(STATE_ENTRY))


def restore_seed_generators(model: keras.Model, state: dict) -> bool:
    """Sets the model's seed generators to the saved states; False (nothing set) when the
    model has another number of them than the file recorded."""
    variables, saved = _seed_states(model), state.get("seed_generators") or []
    if len(variables) != len(saved):
        return False
    for variable, value in zip(variables, saved, strict=True):
        variable.assign(keras.ops.convert_to_tensor(value, dtype=variable.dtype))
    if state.get("torch_rng"):
        _torch_rng(state["torch_rng"])
    return True


class RestoreGenerators(keras.callbacks.Callback):
    """Sets the model's random generators to ``state``'s just before the first training
    step (put it last among the callbacks); with ``mid_epoch`` (a run resumed inside an
    epoch) the running metric means too, after ``fit`` has reset them at its start, so
    that the logged loss averages the epoch's steps as in the run that was not
    interrupted.

    Not when the model is loaded, nor when training begins: on PyTorch ``fit`` draws from
    the global generator in between (its symbolic build and its first epoch's start),
    which the run that was not interrupted did not do at that step.
    """

    def __init__(self, state: dict, log=print, mid_epoch: bool = False, on_metrics=None):
        super().__init__()
        self.state, self.log, self.pending, self.mid_epoch = state, log, True, mid_epoch
        self.on_metrics = on_metrics  # called once the metric means are restored

    def on_train_batch_begin(self, batch, logs=None):
        if not self.pending:
            return
        self.pending = False
        if not restore_seed_generators(self.model, self.state):
            self.log("the model's random generators do not match the saved ones: seeded anew")
        if not self.mid_epoch:
            return
        if not restore_metrics(self.model, self.state):
            self.log(
                "the model file holds no running loss mean: the logged loss of this epoch "
                "averages its steps from the resume on"
            )
        elif self.on_metrics is not None:
            self.on_metrics()


class GeneratorsAcrossFits(keras.callbacks.Callback):
    """Carries PyTorch's global generator from the end of one ``fit`` to the first step of
    the next (a run resumed inside an epoch trains in two): PyTorch's ``fit`` draws from it
    when it starts, which one ``fit`` over both parts did not do there. Nothing on the
    other backends, whose generators are the model's own variables."""

    def __init__(self):
        super().__init__()
        self.saved = None

    def on_train_end(self, logs=None):
        self.saved = _torch_rng()

    def on_train_batch_begin(self, batch, logs=None):
        if self.saved is not None:
            _torch_rng(self.saved)
            self.saved = None
