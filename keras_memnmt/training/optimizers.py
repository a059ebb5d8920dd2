"""Adam whose TensorFlow update runs as one fused kernel per variable.

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
subclass) for its ``torch._foreach`` Adam, and JAX fuses the generic update already, so
``build_optimizer`` gives those backends ``keras.optimizers.Adam``. Elsewhere
:class:`FusedAdam` runs Keras's generic update (same values).
"""

from __future__ import annotations

import keras


@keras.saving.register_keras_serializable(package="keras_memnmt")
class FusedAdam(keras.optimizers.Adam):
    """``keras.optimizers.Adam`` (same arguments, same update) with fused TensorFlow kernels.

    The update (Keras 3's Adam, ``epsilon`` added to ``sqrt(v)``)::

        m ← m + (g - m)(1 - β1);  v ← v + (g² - v)(1 - β2)
        θ ← θ - lr·sqrt(1 - β2^t)/(1 - β1^t) · m / (sqrt(v) + ε)

    On TensorFlow it is ``tf.raw_ops.ResourceApplyAdam`` per variable (sparse
    gradients, the embeddings', are made dense first, as Keras's own update does),
    and ``global_clipnorm`` sums the squares with ``tf.nn.l2_loss``. With
    ``amsgrad``, or on another backend, it runs Keras's generic Adam update (on
    PyTorch slower than ``keras.optimizers.Adam``'s ``torch._foreach`` version).
    """

    def _fused(self) -> bool:
        return keras.backend.backend() == "tensorflow" and not self.amsgrad

    def _clip_gradients(self, grads):
        if not (self._fused() and self.global_clipnorm and self.global_clipnorm > 0):
            return super()._clip_gradients(grads)
        import tensorflow as tf

        grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
        present = [g for g in grads if g is not None]
        norm = tf.sqrt(2.0 * tf.add_n([tf.nn.l2_loss(tf.cast(g, "float32")) for g in present]))
        # Keras's clip_by_global_norm: no-op under the norm, NaN for a non-finite norm.
        scale = self.global_clipnorm * tf.minimum(1.0 / norm, 1.0 / self.global_clipnorm)
        scale = scale + (norm - norm)
        return [None if g is None else g * tf.cast(scale, g.dtype) for g in grads]

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


def build_optimizer(config) -> keras.optimizers.Optimizer:
    """The optimizer a ``TrainConfig`` names, at its learning rate, with global-norm clipping."""
    if config.optimizer == "adadelta":  # the paper's setting
        return keras.optimizers.Adadelta(learning_rate=config.learning_rate, rho=0.95, epsilon=1e-6,
                                         global_clipnorm=config.clipnorm)
    # One fused kernel per variable on TensorFlow (see above); Keras's Adam elsewhere
    # (PyTorch: Keras's torch._foreach Adam, which it picks only for keras.optimizers.Adam).
    adam = FusedAdam if keras.backend.backend() == "tensorflow" else keras.optimizers.Adam
    return adam(learning_rate=config.learning_rate, global_clipnorm=config.clipnorm)
