"""``keras.layers.LSTMCell`` whose step can start from an input product computed outside it.

Why our own: a decoder cell knows every target word ``y_{t-1}`` before a teacher-forced
loop starts, so the bottom LSTM's product with the word embedding ``e W_e + b`` is one
``(B·T) × E`` matmul before the loop instead of ``T`` products of ``B`` rows inside it
(what cuDNN's RNN kernels and Keras's fused LSTM layer do with the input projection).
Keras's ``LSTMCell.call`` takes the inputs, not their product. Same weights (names,
shapes, layout), same equations, same config: a drop-in for the decoder cells.
"""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_memnmt")
class LSTMCell(keras.layers.LSTMCell):
    """``keras.layers.LSTMCell`` plus :meth:`step_from_input_product`.

    ``z = x W + b + h U``; ``i, f, g, o = split(z)``; ``c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g)``;
    ``h' = σ(o) ⊙ tanh(c')`` (Keras's LSTM, gates in the order i, f, c, o). ``call`` is
    Keras's own.
    """

    def step_from_input_product(self, input_product, states):
        """``(h', [h', c'])`` from ``x W + b`` ``(B, 4·units)``, computed by the caller, and
        ``[h_{t-1}, c_{t-1}]``. ``implementation=2`` with a bias, no dropout."""
        h_prev, c_prev = states
        # The weight is cast here: a decoder cell calls this outside the LSTM's __call__.
        z = ops.add(input_product, ops.matmul(h_prev, ops.cast(self.recurrent_kernel, h_prev.dtype)))
        c, o = self._compute_carry_and_output_fused(ops.split(z, 4, axis=-1), c_prev)
        h = o * self.activation(c)
        return h, [h, c]
