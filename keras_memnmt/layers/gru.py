"""``keras.layers.GRUCell`` with its gates taken apart by one split instead of slices.

Why our own: Keras's GRUCell (``implementation=2``, ``reset_after=True``, its
defaults) slices the recurrent product ``h_{t-1} U`` three times. On TensorFlow the
gradient of each slice is a ``StridedSliceGrad`` that writes a zero-padded copy of
the whole ``(B, 3·units)`` product, three per GRU step in the backward loop; in the
profile of an RNNsearch training step they took about 26 ms of the two cores' time
(encoder and decoder together), against a few ms for the one ``ConcatV2`` that is
the gradient of a split (docs/benchmarks.md, "Training step profile"). Same weights
(names, shapes, layout), same equations, same config: a drop-in for the decoder
cells and the encoder.
"""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_memnmt")
class GRUCell(keras.layers.GRUCell):
    """``keras.layers.GRUCell``; the ``reset_after=True`` step written with ``ops.split``.

    ``z = σ(x W_z + b_z + h U_z + c_z)``, ``r = σ(x W_r + b_r + h U_r + c_r)``,
    ``h̃ = tanh(x W_h + b_h + r ⊙ (h U_h + c_h))``, ``h' = z ⊙ h + (1 - z) ⊙ h̃``
    (Keras's GRU, gates in the order z, r, h). Other settings (``reset_after=False``,
    no bias, dropout in training, ``implementation=1``) run Keras's own ``call``.
    Under a mixed policy it runs in the compute dtype (nothing is kept in float32).
    """

    def call(self, inputs, states, training=False):
        nested = isinstance(states, (list, tuple))
        dropping = training and (0.0 < self.dropout < 1.0 or 0.0 < self.recurrent_dropout < 1.0)
        if not self.reset_after or not self.use_bias or self.implementation != 2 or dropping:
            return super().call(inputs, states, training=training)
        h_prev = states[0] if nested else states
        input_bias, recurrent_bias = ops.unstack(ops.convert_to_tensor(self.bias), 2, axis=0)
        x_z, x_r, x_h = ops.split(ops.add(ops.matmul(inputs, self.kernel), input_bias), 3, axis=-1)
        h_z, h_r, h_h = ops.split(
            ops.add(ops.matmul(h_prev, self.recurrent_kernel), recurrent_bias), 3, axis=-1
        )
        z = self.recurrent_activation(x_z + h_z)
        r = self.recurrent_activation(x_r + h_r)
        candidate = self.activation(x_h + r * h_h)
        h = z * h_prev + (1 - z) * candidate
        return h, ([h] if nested else h)
