"""A pre-norm Transformer decoder layer (Vaswani et al. 2017, §3.1) whose step returns its
cross-attention weights, on core Keras's ``MultiHeadAttention``.

Its sub-layers, their names, attribute names and creation order are those of keras-hub's
``TransformerDecoder`` (``normalize_first=True``, with cross-attention): a model saved with
one loads into the other, weight for weight. Its computation is keras-hub's too, operation
for operation, so the outputs are the same to the bit; what it adds is the cross-attention
weights of a call (``return_attention``), a self-attention cache that grows by a position
per step, and the source's keys and values computed on their own (:meth:`source_keys_values`).
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers._checks import check_positive_int, check_rate
from keras_memnmt.layers.readout import clone_initializer


def _attend(attention: keras.layers.MultiHeadAttention, query, key, value, mask, training, weights: bool):
    """``attention``'s dot-product attention of the projected ``query (B, T, H, K)`` over the
    projected ``key``, ``value (B, S, H, K)``: ``(output (B, T, H, K), weights (B, H, T, S) or None)``.

    Keras's ``MultiHeadAttention`` computes the weights itself (an explicit softmax) where its
    attention has dropout; without, it calls the fused ``ops.dot_product_attention``
    (``jax.nn.dot_product_attention``, ``torch``'s ``scaled_dot_product_attention``), whose
    output differs in its last bits from the explicit softmax's, and returns no weights. So
    with dropout the weights are the layer's own; without, the fused kernel still gives the
    output and the weights are computed beside it, by the explicit path's own operations
    (scaled query, ``einsum``, the masked softmax). The output is then the same whether the
    weights are asked for or not (``return_attention_scores=True`` would switch the layer to
    the explicit path), and a compiled search that drops them does not compute them.
    """
    output, scores = attention._compute_attention(
        query=query, key=key, value=value, attention_mask=mask, training=training
    )  # scores: None from the fused kernel
    if weights and scores is None:
        scaled = ops.multiply(query, ops.cast(attention._inverse_sqrt_key_dim, query.dtype))
        scores = attention._masked_softmax(ops.einsum(attention._dot_product_equation, key, scaled), mask)
    return output, scores


def _head_mean(scores):
    """Attention weights ``(B, H, T, S)`` → their mean over the heads ``(B, T, S)``, float32."""
    return ops.mean(ops.cast(scores, "float32"), axis=1)


@keras.saving.register_keras_serializable(package="keras_memnmt")
class TransformerDecoder(keras.layers.Layer):
    """One pre-norm Transformer decoder layer: causal self-attention, attention over the
    encoder's output, a feed-forward network, each reading a layer-normed input and added to
    the residual stream (Vaswani et al. 2017, §3.1, with the norms before the sub-layers:
    Wang et al. 2019).

    The sub-layers are keras-hub's ``TransformerDecoder``'s (``normalize_first=True``), under
    the same attribute names, so that the weights of a model built on either load into the
    other: ``_self_attention_layer`` and ``_cross_attention_layer`` (Keras
    ``MultiHeadAttention``, ``num_heads`` heads of ``D / num_heads`` features), their layer norms
    and dropouts, ``_feedforward_intermediate_dense`` (``intermediate_dim`` units, ``activation``)
    and ``_feedforward_output_dense``, ``_feedforward_layer_norm``. The class's name is
    keras-hub's too: a ``.keras`` file keeps the layers of a list under their class's name
    (``decoder_layers/transformer_decoder_1/...``).

    Args:
        intermediate_dim: hidden size of the feed-forward network.
        num_heads: attention heads; the input size ``D`` must be a multiple of it.
        dropout: dropout on each sub-layer's output, and on the attention weights unless
            ``attention_dropout`` is given.
        attention_dropout: dropout on the attention weights; None (default): ``dropout``
            (keras-hub's one rate). fairseq's ``--attention-dropout`` defaults to 0.
        activation: the feed-forward network's hidden activation.
        layer_norm_epsilon: the layer norms' epsilon.
        kernel_initializer: initializer of every kernel.
        bias_initializer: initializer of every bias.

    Call arguments:
        decoder_sequence: ``(B, T, D)``, the target positions (``T = 1`` in a cached step).
        encoder_sequence: ``(B, Tx, D)``, the encoder's output (not read when
            ``cross_attention_cache`` is given, except for its shape on the first call).
        encoder_padding_mask: ``(B, Tx)`` bool, False at padded source positions, which get
            no attention.
        self_attention_cache: None (teacher forcing: every position attends to itself and
            the positions before it), or the keys and values of the positions so far,
            ``(B, 2, L, H, D/H)``, for a one-position step.
        self_attention_cache_update_index: with a cache: None, the step's keys and values are
            appended to it (``L + 1`` positions, all attended to); an int or scalar tensor
            ``t``, they are written at slot ``t`` of a cache of fixed length ``L`` and the
            step attends to slots ``0..t``.
        cross_attention_cache: with a self-attention cache, the source's keys and values
            ``(B, 2, Tx, H, D/H)`` (:meth:`source_keys_values`).
        return_attention: also return the cross-attention weights, averaged over the heads.
        training: dropout on.

    Returns:
        Teacher forcing: ``outputs (B, T, D)``, and ``attention (B, T, Tx)`` float32 with
        ``return_attention``. A cached step: ``(outputs (B, 1, D), self_attention_cache)``,
        and ``attention (B, 1, Tx)`` float32 with ``return_attention``. Each row of the
        attention sums to 1 over the unpadded source positions; padded ones get 0.

    Example:
        >>> layer = TransformerDecoder(64, num_heads=4)  # doctest: +SKIP
        >>> outputs, attention = layer(target, memory, encoder_padding_mask=mask,
        ...                            return_attention=True)  # doctest: +SKIP
    """

    def __init__(
        self,
        intermediate_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        attention_dropout: float | None = None,
        activation: Any = "relu",
        layer_norm_epsilon: float = 1e-5,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.intermediate_dim = check_positive_int("intermediate_dim", intermediate_dim)
        self.num_heads = check_positive_int("num_heads", num_heads)
        self.dropout = check_rate("dropout", dropout)
        self.attention_dropout = (
            None if attention_dropout is None else check_rate("attention_dropout", attention_dropout)
        )
        self.activation = keras.activations.get(activation)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        if encoder_sequence_shape is None:
            raise ValueError("TransformerDecoder attends to an encoder: call it with `encoder_sequence`")
        hidden = decoder_sequence_shape[-1]
        if hidden % self.num_heads:
            raise ValueError(f"the input size must be a multiple of num_heads={self.num_heads}, got {hidden}")
        head = hidden // self.num_heads

        def attention(name, **options):
            return keras.layers.MultiHeadAttention(
                num_heads=self.num_heads,
                key_dim=head,
                dropout=self.dropout if self.attention_dropout is None else self.attention_dropout,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                bias_initializer=clone_initializer(self.bias_initializer),
                dtype=self.dtype_policy,
                name=name,
                **options,
            )

        def norm(name):
            layer = keras.layers.LayerNormalization(epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name)
            layer.build(decoder_sequence_shape)
            return layer

        def dropout(name):
            return keras.layers.Dropout(rate=self.dropout, dtype=self.dtype_policy, name=name)

        # Created in keras-hub's order, so that `weights` lists them in its order too.
        self._self_attention_layer = attention("self_attention")
        self._self_attention_layer.build(query_shape=decoder_sequence_shape, value_shape=decoder_sequence_shape)
        self._self_attention_layer_norm = norm("self_attention_layer_norm")
        self._self_attention_dropout = dropout("self_attention_dropout")
        self._cross_attention_layer = attention("cross_attention", value_dim=head)
        self._cross_attention_layer.build(query_shape=decoder_sequence_shape, value_shape=encoder_sequence_shape)
        self._cross_attention_layer_norm = norm("cross_attention_layer_norm")
        self._cross_attention_dropout = dropout("cross_attention_dropout")
        self._feedforward_intermediate_dense = keras.layers.Dense(
            self.intermediate_dim,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="feedforward_intermediate_dense",
        )
        self._feedforward_intermediate_dense.build(decoder_sequence_shape)
        self._feedforward_output_dense = keras.layers.Dense(
            hidden,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="feedforward_output_dense",
        )
        self._feedforward_output_dense.build((*decoder_sequence_shape[:-1], self.intermediate_dim))
        self._feedforward_layer_norm = norm("feedforward_layer_norm")
        self._feedforward_dropout = dropout("feedforward_dropout")
        self.built = True

    def source_keys_values(self, encoder_sequence):
        """The cross-attention's keys and values of the encoder's output ``(B, Tx, D)``:
        ``(B, 2, Tx, H, D/H)``, the ``cross_attention_cache`` of every step over that source."""
        attention = self._cross_attention_layer
        return ops.stack([attention._key_dense(encoder_sequence), attention._value_dense(encoder_sequence)], axis=1)

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        encoder_padding_mask=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        return_attention: bool = False,
        training=False,
    ):
        if (self_attention_cache is None) != (cross_attention_cache is None):
            raise ValueError(
                "pass self_attention_cache and cross_attention_cache together (a cached step) "
                "or neither (teacher forcing)"
            )
        x = decoder_sequence
        # 1. Self-attention: each position attends to itself and the positions before it.
        attended = self._self_attention(
            self._self_attention_layer_norm(x), self_attention_cache, self_attention_cache_update_index, training
        )
        if self_attention_cache is not None:
            attended, self_attention_cache = attended
        x = ops.add(self._self_attention_dropout(attended, training=training), x)
        # 2. Attention over the source's unpadded positions.
        normed = self._cross_attention_layer_norm(x)
        attention = self._cross_attention_layer
        query = attention._query_dense(normed)  # (B, T, H, D/H)
        if cross_attention_cache is None:
            key, value = attention._key_dense(encoder_sequence), attention._value_dense(encoder_sequence)
        else:
            key, value = cross_attention_cache[:, 0], cross_attention_cache[:, 1]  # (B, Tx, H, D/H)
        # keras-hub's padding mask: (B, 1, Tx) int32.
        mask = None if encoder_padding_mask is None else ops.cast(ops.expand_dims(encoder_padding_mask, 1), "int32")
        attended, weights = _attend(attention, query, key, value, mask, training, return_attention)
        x = ops.add(self._cross_attention_dropout(attention._output_dense(attended), training=training), x)
        # 3. The feed-forward network.
        normed = self._feedforward_layer_norm(x)
        hidden = self._feedforward_output_dense(self._feedforward_intermediate_dense(normed))
        x = ops.add(self._feedforward_dropout(hidden, training=training), x)
        outputs = (x,) if self_attention_cache is None else (x, self_attention_cache)
        if return_attention:
            outputs += (_head_mean(weights),)
        return outputs[0] if len(outputs) == 1 else outputs

    def _self_attention(self, normed, cache, index, training):
        """The self-attention sub-layer's output ``(B, T, D)`` on the layer-normed input; with
        a cache, ``(output, new cache)``."""
        attention = self._self_attention_layer
        query = attention._query_dense(normed)  # (B, T, H, D/H)
        key, value = attention._key_dense(normed), attention._value_dense(normed)
        if cache is None:  # teacher forcing: position i attends to 0..i, keras-hub's (B, T, T) mask
            steps = ops.arange(ops.shape(normed)[1])
            mask = ops.broadcast_to(
                ops.expand_dims(ops.greater_equal(steps[:, None], steps[None, :]), 0),
                (ops.shape(normed)[0], ops.shape(normed)[1], ops.shape(normed)[1]),
            )
        elif index is None:
            # Appended: the cache then holds exactly the positions 0..t, none to mask. A
            # `slice_update` into a cache that grows would be, on TensorFlow, an XLA
            # dynamic-update-slice compiled for every new shape.
            position = ops.cast(ops.stack([key, value], axis=1), cache.dtype)  # (B, 2, 1, H, D/H)
            cache = ops.concatenate([cache, position], axis=2)
            key, value, mask = cache[:, 0], cache[:, 1], None
        else:  # written at slot `index` of a fixed cache; slots after it are masked out
            start = [0, index, 0, 0]
            key = ops.slice_update(cache[:, 0], start, key)
            value = ops.slice_update(cache[:, 1], start, value)
            cache = ops.stack((key, value), axis=1)
            slots = ops.arange(ops.shape(cache)[2])
            mask = ops.broadcast_to(
                ops.less_equal(slots, index)[None, None, :], (ops.shape(normed)[0], 1, ops.shape(cache)[2])
            )
        attended, _ = _attend(attention, query, key, value, mask, training, weights=False)
        output = attention._output_dense(attended)
        return output if cache is None else (output, cache)

    def compute_output_shape(self, decoder_sequence_shape, *args, **kwargs):
        return decoder_sequence_shape

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "intermediate_dim": self.intermediate_dim,
            "num_heads": self.num_heads,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "activation": keras.activations.serialize(self.activation),
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
