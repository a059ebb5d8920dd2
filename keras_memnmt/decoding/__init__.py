"""Greedy and beam search over any decoder's single step.

Both searches drive a step callback
`next_fn(tokens (N,), states [(N, ·), ...]) -> (logits (N, V), new_states, attention (N, Tx) | None)`
inside one compiled loop (`keras.ops.while_loop`; on TensorFlow a `tf.while_loop` with
shape invariants, so that finished sentences can leave it); see
`keras_memnmt.decoding.common`.
"""

from keras_memnmt.decoding.beam import beam_search
from keras_memnmt.decoding.common import LENGTH_PENALTIES, length_penalty
from keras_memnmt.decoding.greedy import greedy_search

__all__ = ["LENGTH_PENALTIES", "beam_search", "greedy_search", "length_penalty"]
