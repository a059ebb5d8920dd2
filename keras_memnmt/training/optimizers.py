"""Adam whose TensorFlow update runs as one fused kernel per variable, and which keeps the
global norm of its gradients.

Why our own: Keras 3's ``Adam.update_step`` is written with ``keras.ops``, about
eleven elementwise ops per variable, and its ``global_clipnorm`` adds a square, a
sum and a multiply per gradient. JAX compiles all of it into a few fused loops
(XLA); TensorFlow without XLA runs every op as its own pass over the variable's
memory. For RNNsearch at the comparison size (10.4M weights, 42 MB) the TensorFlow
profile of one training step showed about 40 ms of the two cores' time in the
optimizer (docs/benchmarks.md). TensorFlow has the fused kernel
(``ResourceApplyAdam``, the update of the Keras 2 / ``tf.compat.v1`` Adam, with the
same formula as Keras 3's Adam), and ``tf.nn.l2_loss`` sums the squares in one pass.
Only for TensorFlow: on PyTorch, Keras swaps ``keras.optimizers.Adam`` itself (not a
subclass) for its ``torch._foreach`` Adam, so there :class:`FusedAdam` derives from that
class; JAX fuses Keras's generic update already.
"""

from __future__ import annotations

import keras
from keras import ops

if keras.backend.backend() == "torch":
    # Keras's own torch._foreach Adam, which `keras.optimizers.Adam(...)` gives on PyTorch
    # (it swaps the exact class only, never a subclass); the same update.
    from keras.src.backend.torch.optimizers.torch_adam import Adam as _Adam
else:
    _Adam = keras.optimizers.Adam


class GradientNormTracking:
    """Mixin for a Keras optimizer: keeps the global norm of each update's gradients.

    ``gradient_norm`` (a float32 optimizer variable, created last in ``build``) holds
    ``sqrt(sum_i ||g_i||^2)`` over every gradient of the latest update, before clipping.
    It is computed once, in ``_clip_gradients``, which every backend's update runs
    (TensorFlow's and PyTorch's ``apply``, JAX's ``stateless_apply``), and ``global_clipnorm``
    clips with it: no second backward pass, no second norm. A saved optimizer without the
    variable (one fewer) loads with the norm at 0.
    """

    def build(self, variables):
        super().build(variables)
        self.gradient_norm = self.add_variable((), initializer="zeros", dtype="float32", name="gradient_norm")

    def load_own_variables(self, store):
        variables = self.variables
        if len(store.keys()) == len(variables) - 1 and variables[-1] is self.gradient_norm:
            for i, variable in enumerate(variables[:-1]):
                variable.assign(store[str(i)])
            return
        super().load_own_variables(store)

    def _global_norm(self, grads) -> tuple:
        """``(norm, grads)``: the gradients' global norm (a scalar) and the gradients to clip."""
        present = [g for g in grads if g is not None]
        norm = ops.sqrt(ops.sum(ops.stack([ops.sum(ops.square(ops.cast(g, "float32"))) for g in present])))
        return norm, grads

    def _clip_gradients(self, grads):
        grads = _sum_over_replicas(grads)
        norm, grads = self._global_norm(grads)
        self.gradient_norm.assign(ops.cast(norm, "float32"))
        if not (self.global_clipnorm and self.global_clipnorm > 0) or self.clipnorm:
            return super()._clip_gradients(grads)
        # Keras's clip_by_global_norm: no-op under the norm, NaN for a non-finite norm.
        scale = self.global_clipnorm * ops.minimum(1.0 / norm, 1.0 / self.global_clipnorm)
        scale = scale + (norm - norm)
        return [None if g is None else g * ops.cast(scale, g.dtype) for g in grads]

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # TensorFlow's update step sums the replicas' gradients here, after the clipping;
        # _clip_gradients has summed them already.
        return list(grads_and_vars)


def _sum_over_replicas(grads):
    """Under a TensorFlow ``tf.distribute`` strategy, the replicas' gradients summed, so that
    the norm and the clipping see the whole batch's gradient as one device does (Keras's
    TensorFlow optimizer clips each replica's share and sums them after); else ``grads``."""
    if keras.backend.backend() != "tensorflow":
        return grads
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return grads
    summed = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, [g for g in grads if g is not None]))
    return [None if g is None else next(summed) for g in grads]


@keras.saving.register_keras_serializable(package="keras_memnmt")
class FusedAdam(GradientNormTracking, _Adam):
    """``keras.optimizers.Adam`` (same arguments, same update) with fused TensorFlow kernels.

    The update (Keras 3's Adam, ``epsilon`` added to ``sqrt(v)``)::

        m ← m + (g - m)(1 - β1);  v ← v + (g² - v)(1 - β2)
        θ ← θ - lr·sqrt(1 - β2^t)/(1 - β1^t) · m / (sqrt(v) + ε)

    On TensorFlow it is ``tf.raw_ops.ResourceApplyAdam`` per variable (sparse
    gradients, the embeddings', are made dense first, as Keras's own update does),
    and the global norm (kept in ``gradient_norm``, see :class:`GradientNormTracking`)
    sums the squares with ``tf.nn.l2_loss``. With ``amsgrad`` it runs Keras's generic
    Adam update; on JAX Keras's generic update (which XLA fuses), on PyTorch Keras's
    ``torch._foreach`` Adam.
    """

    def _fused(self) -> bool:
        return keras.backend.backend() == "tensorflow" and not self.amsgrad

    def _global_norm(self, grads) -> tuple:
        if not self._fused():
            return super()._global_norm(grads)
        import tensorflow as tf

        grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
        present = [g for g in grads if g is not None]
        return tf.sqrt(2.0 * tf.add_n([tf.nn.l2_loss(tf.cast(g, "float32")) for g in present])), grads

    def update_step(self, gradient, variable, learning_rate):
        if not self._fused():
            return super().update_step(gradient, variable, learning_rate)
        import tensorflow as tf

        dtype = variable.dtype
        step = tf.cast(self.iterations + 1, dtype)
        beta_1 = tf.cast(self.beta_1, dtype)
        beta_2 = tf.cast(self.beta_2, dtype)
        index = self._get_variable_index(variable)
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=self._momentums[index].value.handle,
            v=self._velocities[index].value.handle,
            beta1_power=tf.pow(beta_1, step),
            beta2_power=tf.pow(beta_2, step),
            lr=tf.cast(learning_rate, dtype),
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(tf.convert_to_tensor(gradient), dtype),
        )


@keras.saving.register_keras_serializable(package="keras_memnmt")
class InverseSqrtSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """A linear warm-up to ``peak`` over ``warmup_steps`` updates, then decay as
    ``1/sqrt(step)`` (Vaswani et al. 2017, §5.3, with the peak given instead of derived
    from ``d_model``)::

        rate(n) = peak · min(n / warmup_steps, sqrt(warmup_steps / n)),  n = step + 1

    Keras's own schedules have a warm-up only in front of a cosine decay, hence this one.
    """

    def __init__(self, peak: float, warmup_steps: int):
        if warmup_steps < 1:
            raise ValueError(f"warmup_steps={warmup_steps!r}: expected an int >= 1")
        self.peak, self.warmup_steps = float(peak), int(warmup_steps)

    def __call__(self, step):
        n = keras.ops.cast(step, "float32") + 1.0
        w = float(self.warmup_steps)
        return self.peak * keras.ops.minimum(n / w, keras.ops.sqrt(w / n))

    def get_config(self) -> dict:
        return {"peak": self.peak, "warmup_steps": self.warmup_steps}


def build_optimizer(config) -> keras.optimizers.Optimizer:
    """The optimizer a ``TrainConfig`` names, at its learning rate, with global-norm
    clipping; with ``warmup_steps`` > 0 the rate follows :class:`InverseSqrtSchedule`."""
    rate = config.learning_rate
    if config.warmup_steps:
        rate = InverseSqrtSchedule(config.learning_rate, config.warmup_steps)
    if config.optimizer == "adadelta":  # the paper's setting
        return keras.optimizers.Adadelta(learning_rate=rate, rho=0.95, epsilon=1e-6, global_clipnorm=config.clipnorm)
    # One fused kernel per variable on TensorFlow (see above), Keras's update elsewhere; on
    # every backend it keeps the gradients' global norm (TensorBoard's train/gradient_norm).
    return FusedAdam(
        learning_rate=rate, beta_2=config.adam_beta_2, epsilon=config.adam_epsilon, global_clipnorm=config.clipnorm
    )
