"""Attention over the source annotations: additive (Bahdanau) and Luong scores.

Both layers share one two-stage API so that the key-side work is done once
per sentence, outside the decoding loop:

1. `keys = layer.precompute_keys(annotations)` — `(B, Tx, D) -> (B, Tx, A)`;
2. `context, weights = layer(query, keys, values, mask)` — once per step.

Notation: `B` batch, `Tx` source length, `Q` query size, `D` annotation
(value) size, `A` key size. All projections use Keras' row-vector convention
`x @ kernel`.

Masking decision: masked scores are filled with a large negative number
(`-1e9`) before the softmax, then the weights are multiplied by the mask and
renormalized, so masked positions get *exactly* zero weight. A row whose
positions are all masked gets all-zero weights (and a zero context) instead
of NaN.

Mixed precision: under a float16 or bfloat16 compute dtype the scores, the key
projections and the context are computed in that dtype, but `masked_softmax`
(and so both layers' weights) runs in float32 and casts the weights back: the
exponentials, the `-1e9` fill (`-inf` in float16) and the renormalization's
floor (`1e-12`, zero in float16) stay exact. In float32 nothing is cast.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers._checks import check_choice, check_positive_int

LUONG_SCORES = ("dot", "general", "concat")


def masked_softmax(scores: Any, mask: Any | None = None) -> Any:
    """Softmax over the last axis that gives masked positions exactly zero.

    Computed in float32 whatever the dtype of `scores` (a float16 or bfloat16
    score is cast up); the weights are returned in the dtype of `scores`.

    Args:
        scores: `(B, Tx)` unnormalized scores.
        mask: optional `(B, Tx)` bool or float (1 = keep, 0 = masked).

    Returns:
        `(B, Tx)` weights; each row sums to 1 over its unmasked positions
        (to 0 if the whole row is masked).
    """
    dtype = keras.backend.standardize_dtype(scores.dtype)
    scores = ops.cast(scores, "float32")
    if mask is None:
        return ops.cast(ops.softmax(scores, axis=-1), dtype)
    if keras.backend.standardize_dtype(mask.dtype) != "bool":
        mask = ops.not_equal(mask, 0)
    fill = ops.cast(-1e9, "float32")
    weights = ops.softmax(ops.where(mask, scores, fill), axis=-1)
    weights = ops.where(mask, weights, ops.zeros_like(weights))
    total = ops.sum(weights, axis=-1, keepdims=True)
    return ops.cast(weights / ops.maximum(total, ops.cast(1e-12, "float32")), dtype)


def _tanh_scores(projected_query: Any, keys: Any, score_vector: Any) -> Any:
    """`e_j = v^T tanh(q' + k_j)`: `(B, A), (B, Tx, A), (A,) -> (B, Tx)`."""
    hidden = ops.tanh(ops.expand_dims(projected_query, 1) + keys)  # (B, Tx, A)
    return ops.sum(hidden * score_vector, axis=-1)


# The `(B, Tx, A)` tanh is the one activation of the decoder step that grows with the
# source length; its backward needs it, so training keeps one per target step:
# B·Tx·Ty·A floats (64·40·40·512 = 210 MB at the 40-token bucket). `keras.remat`
# (tf.recompute_grad / jax.checkpoint / torch checkpoint) keeps only the inputs and
# recomputes the tanh in the backward pass. Measured on TensorFlow, RNNsearch at the
# comparison size: peak RSS 1531 → 1425 MB after the 32-token bucket, 1786 → 1606 MB
# after the 40-token one; on JAX 2464 → 2262 MB (40 tokens) and 2220 → 1760 MB (32).
_tanh_scores_remat = keras.remat(_tanh_scores)


def _weighted_sum(weights: Any, values: Any) -> Any:
    """`(B, Tx) x (B, Tx, D) -> (B, D)`: c = sum_j alpha_j h_j."""
    return ops.sum(ops.expand_dims(weights, -1) * values, axis=1)


class _SourceAttention(keras.layers.Layer):
    """What both attention layers share: the mask argument and output shapes.

    `mask` is the source mask, an explicit argument; the layer consumes it
    (`compute_mask` returns None), so Keras does not warn that it is dropped.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.supports_masking = True

    def _check_built(self) -> None:
        if not self.built:
            raise ValueError(
                f"{self.__class__.__name__} '{self.name}' is not built: call "
                "`build(query_shape, values_shape)` before `precompute_keys`."
            )

    def compute_mask(self, *args: Any, **kwargs: Any) -> None:
        return None

    def _scores(self, projected_query: Any, keys: Any) -> Any:
        """`v^T tanh(q' + k_j)` with this layer's `score_vector`, rematerialized if asked."""
        score = _tanh_scores_remat if self.rematerialize else _tanh_scores
        return score(projected_query, keys, ops.cast(self.score_vector, self.compute_dtype))

    def compute_output_shape(
        self, query_shape: tuple, keys_shape: tuple, values_shape: tuple, mask_shape=None
    ) -> tuple:
        return (query_shape[0], values_shape[-1]), tuple(values_shape[:2])


@keras.saving.register_keras_serializable(package="keras_memnmt")
class AdditiveAttention(_SourceAttention):
    """Additive (Bahdanau / "concat"-style MLP) attention.

    Bahdanau et al. 2014, as written in MemDec Eq. 3 (Wang et al. 2016):

        e_j     = v_a^T tanh(W_a q + U_a h_j)
        alpha_j = softmax_j(e_j)                 (masked, see module docstring)
        c       = sum_j alpha_j h_j              (Eq. 3)

    `U_a h_j` does not depend on the step, so it is computed once per sentence
    by `precompute_keys`. Decision: no bias inside the tanh, as in the
    equation. Mixed precision: `alpha` is computed in float32 (`masked_softmax`),
    the rest in the compute dtype.

    Args:
        units: int, the attention hidden size `A` (rows of `W_a`, `U_a`).
        kernel_initializer: initializer of `W_a`, `U_a` and `v_a`.
        rematerialize: recompute the `(B, Tx, A)` tanh in the backward pass instead
            of keeping it for every target step (`keras.remat`; less memory, a
            little more compute). Values and gradients are the same either way.
        **kwargs: base `keras.layers.Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(B, Q)`, the decoder query (e.g. `s_{t-1}`).
        keys: `(B, Tx, A)`, the output of `precompute_keys(annotations)`.
        values: `(B, Tx, D)`, the annotations `h_j`.
        mask: optional `(B, Tx)` bool or float, 1 for real source positions.

    Returns:
        `(context, weights)`: `(B, D)` and `(B, Tx)`.

    Weights: `query_kernel` `(Q, A)` = `W_a^T`, `key_kernel` `(D, A)` = `U_a^T`,
    `score_vector` `(A,)` = `v_a`.

    Example:

    ```python
    attention = AdditiveAttention(units=8)
    attention.build(query_shape=(None, 16), values_shape=(None, None, 12))
    keys = attention.precompute_keys(annotations)          # (B, Tx, 8)
    context, weights = attention(query, keys, annotations, source_mask)
    ```
    """

    def __init__(
        self,
        units: int,
        kernel_initializer: Any = "glorot_uniform",
        rematerialize: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.rematerialize = bool(rematerialize)

    def build(self, query_shape: tuple, values_shape: tuple) -> None:
        """Creates `W_a` from the query size and `U_a` from the value size."""
        self.query_kernel = self.add_weight(
            name="query_kernel",
            shape=(query_shape[-1], self.units),
            initializer=self.kernel_initializer,
        )
        self.key_kernel = self.add_weight(
            name="key_kernel",
            shape=(values_shape[-1], self.units),
            initializer=self.kernel_initializer,
        )
        self.score_vector = self.add_weight(
            name="score_vector",
            shape=(self.units,),
            initializer=self.kernel_initializer,
        )
        self.built = True

    def precompute_keys(self, annotations: Any) -> Any:
        """`U_a h_j` for every source position: `(B, Tx, D) -> (B, Tx, A)`."""
        self._check_built()
        # Called outside `__call__` (no autocast): cast by hand for mixed precision.
        annotations = ops.cast(annotations, self.compute_dtype)
        return ops.matmul(annotations, ops.cast(self.key_kernel, self.compute_dtype))

    def call(self, query: Any, keys: Any, values: Any, mask: Any | None = None) -> tuple:
        projected_query = ops.matmul(query, self.query_kernel)  # (B, A)
        scores = self._scores(projected_query, keys)  # (B, Tx)
        weights = masked_softmax(scores, mask)
        return _weighted_sum(weights, values), weights

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "rematerialize": self.rematerialize,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_memnmt")
class LuongAttention(_SourceAttention):
    """Luong et al. 2015 global attention with a "dot", "general" or "concat" score.

    Salton et al. 2017, Eq. 5-9, with query `q` = decoder state:

        dot      score(q, h_j) = q . h_j                      (Eq. 7)
        general  score(q, h_j) = q^T W_a h_j                  (Eq. 8)
        concat   score(q, h_j) = v_a^T tanh(W_a [q; h_j])     (Eq. 9)
        alpha_j = softmax_j(score)  (Eq. 6),  c = sum_j alpha_j h_j  (Eq. 5)

    Decisions:
    - Eq. 7/8 are printed with an elementwise product in the extracted text; we
      read them as inner products (Luong et al. 2015), which give a scalar score.
    - Eq. 9 is printed without `v_a` and `tanh` (garbled); we use Luong's
      original `v_a^T tanh(W_a [q; h_j])`, no bias.
    - The key side is precomputed once per sentence: "dot" keys are the
      annotations themselves (`A = D`, and `Q` must equal `D`), "general" keys
      are `h_j W_a^T` (`A = Q`), "concat" keys are the `h_j` half of
      `W_a [q; h_j]` (`A = units`).
    - Mixed precision: `alpha` is computed in float32 (`masked_softmax`), the
      scores and the context in the compute dtype.

    Args:
        score: one of "dot", "general", "concat".
        units: int, the hidden size of the "concat" score. Required for
            "concat", must be `None` for "dot" and "general".
        kernel_initializer: initializer of `W_a` (and `v_a`).
        rematerialize: "concat" only: as in :class:`AdditiveAttention`.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        query: `(B, Q)`.
        keys: `(B, Tx, A)`, the output of `precompute_keys(annotations)`.
        values: `(B, Tx, D)`, the annotations.
        mask: optional `(B, Tx)` bool or float, 1 for real source positions.

    Returns:
        `(context, weights)`: `(B, D)` and `(B, Tx)`.

    Weights: "general": `kernel` `(Q, D)` = `W_a`; "concat": `kernel`
    `(Q + D, units)` = `W_a^T` acting on `[q; h_j]`, `score_vector` `(units,)`.
    """

    def __init__(
        self,
        score: str = "dot",
        units: int | None = None,
        kernel_initializer: Any = "glorot_uniform",
        rematerialize: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.rematerialize = bool(rematerialize)
        self.score = check_choice("score", score, LUONG_SCORES)
        if score == "concat":
            self.units = check_positive_int("units", units)
        elif units is not None:
            raise ValueError(
                f"Argument `units` is only used with score='concat' and must be None "
                f"for score={score!r}. Received: units={units!r}"
            )
        else:
            self.units = None
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, query_shape: tuple, values_shape: tuple) -> None:
        """Creates `W_a` (and `v_a`) from the query and value sizes."""
        query_dim, value_dim = query_shape[-1], values_shape[-1]
        if self.score == "dot":
            if query_dim is not None and value_dim is not None and query_dim != value_dim:
                raise ValueError(
                    "score='dot' needs the query size to equal the annotation size. "
                    f"Received: query_shape={query_shape}, values_shape={values_shape}"
                )
        elif self.score == "general":
            self.kernel = self.add_weight(
                name="kernel",
                shape=(query_dim, value_dim),
                initializer=self.kernel_initializer,
            )
        else:
            self._query_dim = query_dim
            self.kernel = self.add_weight(
                name="kernel",
                shape=(query_dim + value_dim, self.units),
                initializer=self.kernel_initializer,
            )
            self.score_vector = self.add_weight(
                name="score_vector",
                shape=(self.units,),
                initializer=self.kernel_initializer,
            )
        self.built = True

    def precompute_keys(self, annotations: Any) -> Any:
        """The step-independent half of the score: `(B, Tx, D) -> (B, Tx, A)`."""
        self._check_built()
        # Called outside `__call__` (no autocast): cast by hand for mixed precision.
        annotations = ops.cast(annotations, self.compute_dtype)
        if self.score == "dot":
            return annotations
        kernel = ops.cast(self.kernel, self.compute_dtype)
        if self.score == "general":
            return ops.matmul(annotations, ops.transpose(kernel))  # h_j W_a^T
        return ops.matmul(annotations, kernel[self._query_dim :])

    def call(self, query: Any, keys: Any, values: Any, mask: Any | None = None) -> tuple:
        if self.score == "concat":
            projected_query = ops.matmul(query, self.kernel[: self._query_dim])  # (B, A)
            scores = self._scores(projected_query, keys)
        else:
            scores = ops.sum(ops.expand_dims(query, 1) * keys, axis=-1)  # (B, Tx)
        weights = masked_softmax(scores, mask)
        return _weighted_sum(weights, values), weights

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "score": self.score,
                "units": self.units,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "rematerialize": self.rematerialize,
            }
        )
        return config
