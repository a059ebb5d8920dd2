"""The Transformer (Vaswani et al. 2017), keras-hub's encoder layers and a decoder layer of
the library's: the attention-only baseline."""

from __future__ import annotations

import contextlib
import warnings

import keras
from keras import ops

from keras_memnmt.decoding.common import shapes_may_change
from keras_memnmt.layers.embedding import embedding_initializer
from keras_memnmt.layers.transformer_decoder import TransformerDecoder
from keras_memnmt.models.base import EncoderDecoder
from keras_memnmt.models.registry import register_model
from keras_memnmt.tokens import PAD_ID

LAYER_NORM_EPSILON = 1e-5  # keras-hub's TransformerEncoder / TransformerDecoder default
CACHE_LENGTH = 256  # the positions of `Transformer.encode`'s self-attention caches on JAX, by default

# keras-hub is imported where its layers are made, not at the top of this module: importing it
# takes about 3 s, and every command imports the model registry.


def _sine_positions(name: str) -> keras.layers.Layer:
    """keras-hub's ``SinePositionEncoding`` (Vaswani et al. 2017, §3.5), computed in float32.

    keras-hub computes the positions and angles in the layer's compute dtype: under
    ``mixed_bfloat16`` (8 significant bits) position 300 and the angle of position 100
    would be rounded by whole units. The encoding is made in float32 and cast to the
    embeddings' dtype where it is added.
    """
    from keras_hub.layers import SinePositionEncoding

    return SinePositionEncoding(dtype="float32", name=name)


def _add_positions(positions: keras.layers.Layer, embedded, start_index=0):
    """``embedded (B, T, D)`` plus the sine encoding of positions ``start_index .. start_index + T - 1``."""
    return ops.add(embedded, ops.cast(positions(embedded, start_index=start_index), embedded.dtype))


def _set_rates(layer: keras.layers.Layer, model_dim: int, dropout: float, attention_dropout: float) -> None:
    """Gives a keras-hub ``TransformerEncoder`` made at the larger of the two rates a dropout
    rate on its attention weights apart from its sub-layers' outputs' one.

    keras-hub's layer has one ``dropout`` for both, where fairseq has two (``--dropout``,
    ``--attention-dropout``, whose default is 0). So the layer is built here and the rates
    of its ``Dropout`` layers are set: Keras's ``MultiHeadAttention`` reads ``_dropout`` at
    each call (at 0 it calls the fused ``ops.dot_product_attention``) and applies
    ``_dropout_layer``; a ``Dropout`` reads its ``rate`` at each call, and one made at a rate
    above 0 has the seed generator it draws with. Built at construction, the layer makes its
    weights before the model's other layers, so a model with two rates draws its initial
    weights in another order than one with one rate.
    """
    layer.build((None, None, model_dim))
    attention = layer._self_attention_layer
    attention._dropout = attention._dropout_layer.rate = attention_dropout
    layer._self_attention_dropout.rate = layer._feedforward_dropout.rate = dropout


@contextlib.contextmanager
def _one_key_softmax():
    """Keras warns that a softmax over an axis of one entry is always 1. So it is where a
    decoder position attends to a self-attention cache of one position (a grown cache's
    first step: bos attends to itself), or to a source of one position."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="You are using a softmax over axis", category=UserWarning)
        yield


@keras.saving.register_keras_serializable(package="keras_memnmt")
class TransformerEncoderStack(keras.layers.Layer):
    """Source embedding + sine positions + ``num_layers`` keras-hub ``TransformerEncoder``
    layers (pre-norm) + a final layer normalization.

    Args:
        vocab_size: source vocabulary size (``0`` = padding).
        model_dim: embedding and model size ``d_model``.
        num_layers: encoder layers.
        num_heads: attention heads (``model_dim`` divisible by it).
        feedforward_units: hidden size of each layer's feed-forward network.
        dropout: dropout on the embeddings plus positions, the attention weights and each
            sub-layer's output (Vaswani et al. 2017, §5.4).
        attention_dropout: dropout on the attention weights instead; None (default): ``dropout``.
        lookup_scale: the factor the embedding's lookups are multiplied by; the rows start at
            ``N(0, 1 / lookup_scale^2)``, so the lookups start at ``N(0, 1)`` whatever it is
            (``sqrt(model_dim)``: Vaswani et al. 2017, §3.4).
        own_embedding: False: the stack has no embedding and its caller passes the embedded
            source (a model whose source and target share one embedding).

    Call arguments:
        source_ids: ``(B, Tx)`` int ids, ``0`` = padding.
        embedded: ``(B, Tx, model_dim)``, the source's embeddings when the stack has no
            embedding of its own (scaled as the caller decides); else None.

    Returns:
        ``(memory (B, Tx, model_dim), mask (B, Tx) bool)``: the encoder's output and
        ``source_ids != PAD_ID``; padded positions are never attended to.
    """

    def __init__(
        self,
        vocab_size: int,
        model_dim: int = 256,
        num_layers: int = 3,
        num_heads: int = 4,
        feedforward_units: int = 1024,
        dropout: float = 0.1,
        lookup_scale: float = 1.0,
        own_embedding: bool = True,
        attention_dropout: float | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        from keras_hub.layers import TransformerEncoder

        self.vocab_size = vocab_size
        self.model_dim = model_dim
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.feedforward_units = feedforward_units
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.lookup_scale = float(lookup_scale)
        self.own_embedding = own_embedding
        self.embedding = (
            keras.layers.Embedding(
                vocab_size,
                model_dim,
                name="source_embedding",
                embeddings_initializer=embedding_initializer(self.lookup_scale),
            )
            if own_embedding
            else None
        )
        self.positions = _sine_positions("source_positions")
        self.embedding_dropout = keras.layers.Dropout(dropout)
        self.encoder_layers = [
            TransformerEncoder(
                feedforward_units,
                num_heads,
                dropout=max(dropout, attention_dropout or 0.0),  # see _set_rates
                normalize_first=True,
                layer_norm_epsilon=LAYER_NORM_EPSILON,
                name=f"encoder_layer_{i}",
            )
            for i in range(num_layers)
        ]
        if attention_dropout is not None and attention_dropout != dropout:
            for layer in self.encoder_layers:
                _set_rates(layer, model_dim, dropout, attention_dropout)
        self.norm = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="encoder_norm")

    def call(self, source_ids, training=False, embedded=None):
        mask = ops.not_equal(source_ids, PAD_ID)  # (B, Tx)
        if (embedded is None) == (self.embedding is None):
            raise ValueError(
                "pass `embedded` exactly when the stack has no embedding of its own "
                f"(own_embedding={self.own_embedding})"
            )
        if embedded is None:
            embedded = self.embedding(source_ids)
            if self.lookup_scale != 1.0:
                embedded = ops.multiply(embedded, self.lookup_scale)
        x = _add_positions(self.positions, embedded)  # (B, Tx, D)
        x = self.embedding_dropout(x, training=training)
        for layer in self.encoder_layers:
            x = layer(x, padding_mask=mask, training=training)
        return self.norm(x), mask

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "model_dim": self.model_dim,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "feedforward_units": self.feedforward_units,
            "dropout": self.dropout,
            "lookup_scale": self.lookup_scale,
            "own_embedding": self.own_embedding,
            "attention_dropout": self.attention_dropout,
        }


@register_model("transformer")
class Transformer(EncoderDecoder):
    """The Transformer (Vaswani et al. 2017) from keras-hub's ``TransformerEncoder`` layers,
    decoder layers of its own (:class:`~keras_memnmt.layers.transformer_decoder.TransformerDecoder`,
    keras-hub's ``TransformerDecoder`` with its weights, that also returns its
    cross-attention), sine positions (``SinePositionEncoding``, §3.5), the base model's
    shape at the sizes of the options.

    An :class:`~keras_memnmt.models.EncoderDecoder`: its options (``embedding_dim`` is
    ``d_model``, ``dropout``, ``tie_embeddings``), the target embedding (tied: ``N(0, 1/d)``
    rows, lookups scaled by ``sqrt(d)``, §3.4), the output projection
    (:meth:`~keras_memnmt.models.EncoderDecoder.output_logits`), ``get_config``,
    ``free_options``, ``warm_start`` and ``build_weights`` are the base's; the encoder, the
    decoder layers, :meth:`call`, :meth:`encode`, :meth:`search_states` and
    :meth:`decode_step` are its own.

    Decisions:

    - Pre-norm (keras-hub's ``normalize_first=True``): each sub-layer reads a layer-normed
      input and adds its output to the residual stream, and a final layer norm closes each
      stack (Wang et al. 2019; Xiong et al. 2020: trains without the warm-up that the
      printed post-norm layers need). The paper normalizes after each residual sum.
    - The output projection has no bias (fairseq's Transformer); tied, it is the target
      embedding matrix (``logits = h E^T``, Press & Wolf 2017), untied a ``Dense`` layer.
      With ``share_embeddings`` (one joint vocabulary, ``joint_vocab``) the source's lookups
      read that same matrix too, scaled as the target's (§3.4: "we share the same weight
      matrix between the two embedding layers and the pre-softmax linear transformation").
    - The source embedding's scale (§3.4 multiplies the embedding layers' weights by
      ``sqrt(d_model)``) is an option, ``scale_source_embedding``: both readings start the
      lookups at ``N(0, 1)`` (rows at ``N(0, 1/d)`` scaled by ``sqrt(d)``, or rows at ``N(0, 1)``
      unscaled), and differ in how fast Adam moves them (about ``sqrt(d)`` times faster
      scaled). Default off, the setting the ``multi30k_transformer`` records were trained with;
      ``multi30k_transformer_tiny`` shares the embeddings, which scales the source as the paper does.
    - Dropout: on the sum of embeddings and positions, on the attention weights and on
      each sub-layer's output before the residual sum (keras-hub's one ``dropout``); the
      attention weights' rate can be set apart (``attention_dropout``, fairseq's
      ``--attention-dropout``).
    - Decoding (:meth:`decode_step`) runs one position per step over key/value caches:
      each decoder layer's self-attention keys and values of the positions so far, and its
      cross-attention keys and values of the source, projected once. Training and decoding
      call the same layers, with and without caches. Where the search loop's shapes may
      change (TensorFlow, PyTorch) the self-attention caches start empty and each step
      appends its position, so step ``t`` reads and reorders ``t + 1`` positions; JAX's
      loop keeps its shapes, so there they hold the search's step bound from the start
      (:meth:`search_states`; :meth:`encode` takes it as ``cache_length``) and every step
      reads all of them, masked.
    - The source attention of a step (:meth:`decode_step`; alignments, attention pictures)
      is the last decoder layer's cross-attention weights, averaged over its heads: the
      attention of the layer whose output the prediction reads, as the recurrent models'
      attention is the one their output reads (fairseq's default alignment layer and heads
      too). Every layer's own is its call's ``return_attention``.

    Args (beyond :class:`~keras_memnmt.models.EncoderDecoder`):
        num_layers: layers of the encoder and of the decoder (paper base: 6; default 3).
        num_heads: attention heads (paper base: 8; default 4); ``embedding_dim`` must be
            divisible by it.
        feedforward_units: hidden size of each layer's feed-forward network (paper base:
            2048; default 1024).
        dropout: dropout on the embeddings plus positions, on the attention weights and on
            each sub-layer's output (§5.4; paper base: 0.1; default 0.1).
        attention_dropout: dropout on the attention weights instead of ``dropout``
            (fairseq's ``--attention-dropout``, default 0 there); None (default): ``dropout``.
        share_embeddings: the source's lookups read the target embedding (needs
            ``tie_embeddings`` and equal vocabularies: ``joint_vocab``); default False.
        scale_source_embedding: the source's own embedding starts at ``N(0, 1/d)`` and its
            lookups are multiplied by ``sqrt(d)`` (§3.4) instead of ``N(0, 1)`` unscaled;
            default False (see the decisions). Shared embeddings are always scaled.

    Of the base's options, ``embedding_dim`` is ``d_model`` here.

    Example:
        >>> model = Transformer(8000, 8000, embedding_dim=256, num_layers=3)  # doctest: +SKIP
        >>> logits = model((source_ids, target_in_ids))  # (B, T, 8000)  # doctest: +SKIP
    """

    tiny_options = dict(embedding_dim=8, num_layers=2, num_heads=2, feedforward_units=16, dropout=0.0)

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        num_layers: int = 3,
        num_heads: int = 4,
        feedforward_units: int = 1024,
        dropout: float = 0.1,
        share_embeddings: bool = False,
        scale_source_embedding: bool = False,
        attention_dropout: float | None = None,
        **kwargs,
    ):
        for name, value in (
            ("source_vocab_size", source_vocab_size),
            ("num_layers", num_layers),
            ("num_heads", num_heads),
            ("feedforward_units", feedforward_units),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name, value in (("dropout", dropout), ("attention_dropout", attention_dropout)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0
            ):
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        if share_embeddings and not kwargs.get("tie_embeddings", False):
            raise ValueError(
                "share_embeddings needs tie_embeddings=True (the one matrix is the source's "
                "and target's embedding and the output projection)"
            )
        if share_embeddings and source_vocab_size != target_vocab_size:
            raise ValueError(
                f"share_embeddings needs one vocabulary for both sides (joint_vocab=True), got "
                f"source_vocab_size={source_vocab_size}, target_vocab_size={target_vocab_size}"
            )
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.feedforward_units = feedforward_units
        self.share_embeddings = bool(share_embeddings)
        self.scale_source_embedding = bool(scale_source_embedding)
        self.attention_dropout = None if attention_dropout is None else float(attention_dropout)
        super().__init__(source_vocab_size, target_vocab_size, dropout=dropout, **kwargs)
        # keras-hub's layers take head size embedding_dim // num_heads without checking it divides.
        if not isinstance(self.embedding_dim, int) or self.embedding_dim < 1 or self.embedding_dim % num_heads:
            raise ValueError(
                f"embedding_dim must be a positive multiple of num_heads, got "
                f"embedding_dim={self.embedding_dim!r}, num_heads={num_heads}"
            )

    def make_encoder(self) -> keras.layers.Layer:
        scale = float(self.embedding_dim) ** 0.5 if self.scale_source_embedding else 1.0
        return TransformerEncoderStack(
            self.source_vocab_size,
            self.embedding_dim,
            self.num_layers,
            self.num_heads,
            self.feedforward_units,
            self.dropout,
            lookup_scale=scale,
            own_embedding=not self.share_embeddings,
            attention_dropout=self.attention_dropout,
            name="encoder",
        )

    def encode_source(self, source_ids, training=False):
        """The encoder stack on ``source_ids``: ``(memory (B, Tx, D), mask (B, Tx))``; with
        ``share_embeddings`` its input is the target embedding's lookups (:meth:`embed_target`)."""
        embedded = self.embed_target(source_ids) if self.share_embeddings else None
        return self.encoder(source_ids, training=training, embedded=embedded)

    def make_decoder(self) -> None:
        # The library's decoder layer, not keras-hub's with the last layer's step written out
        # from its sub-layers (its cross-attention called with `return_attention_scores`): with
        # that, `memnmt translate --beam 5` of 150 test_2016_flickr sentences (a model of
        # multi30k_transformer's sizes, whole process, median of 5 paired runs, 2 cores,
        # 2026-12-02) took 1.09x this layer's CPU time on TensorFlow, 1.05x on JAX and 1.03x
        # on PyTorch; `return_attention_scores` also takes a layer without attention dropout
        # off the fused attention kernel, which changes the last bits of its outputs.
        self.target_positions = _sine_positions("target_positions")
        self.decoder_layers = [
            TransformerDecoder(
                self.feedforward_units,
                self.num_heads,
                dropout=self.dropout,
                attention_dropout=self.attention_dropout,
                layer_norm_epsilon=LAYER_NORM_EPSILON,
                name=f"decoder_layer_{i}",
            )
            for i in range(self.num_layers)
        ]
        self.decoder_norm = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON, name="decoder_norm")
        self.output_layer = self.make_output_layer()  # None when tied

    def call(self, inputs, training=False):
        """Teacher forcing: ``(source_ids (B, Tx), target_in_ids (B, T))`` → logits ``(B, T, V)``.

        Each target position attends to itself and the positions before it (a causal mask)
        and to the real source positions.
        """
        source_ids, target_in = inputs
        memory, mask = self.encode_source(source_ids, training=training)  # (B, Tx, D), (B, Tx)
        x = self.target_dropout(
            _add_positions(self.target_positions, self.embed_target(target_in)), training=training
        )  # (B, T, D)
        for layer in self.decoder_layers:
            x = layer(x, memory, encoder_padding_mask=mask, training=training)
        return self.readout(x, training=training)

    def matmul_macs(self) -> tuple[int, int]:
        # Per layer, with d_model = e: the projections and the feed-forward network; the
        # attention's own products (2 T e per token and layer, about 3% at Multi30k's
        # lengths) are left out.
        e, layers, f = self.embedding_dim, self.num_layers, self.feedforward_units
        encoder = layers * (4 * e * e + 2 * e * f)  # Q, K, V, O; W1, W2
        keys = layers * 2 * e * e  # the cross-attention's K and V of each source token
        decoder = layers * (4 * e * e + 2 * e * e + 2 * e * f)  # self-attention; cross Q and O; W1, W2
        return encoder + keys, decoder + e * self.target_vocab_size  # the output projection, no bias

    def readout(self, outputs, training=False):
        """The last decoder layer's outputs ``(..., D)`` → logits ``(..., V)`` (final layer norm,
        then the output projection: the target embedding's transpose when tied)."""
        return self.output_logits(self.decoder_norm(outputs))

    def encode(self, source_ids, training=False, cache_length: int | None = None) -> list:
        """Source ids → the decoding states, all batch first:

        ``[memory (B, Tx, D), mask (B, Tx) bool, step (B, 1) int32]``, then for each decoder
        layer its self-attention cache ``(B, 2, L, H, D/H)`` (keys and values, zeros until
        written) and its cross-attention keys and values ``(B, 2, Tx, H, D/H)``. ``step`` is
        the next position (0: bos), the same in every row. ``L`` is ``cache_length``:
        ``None`` gives 0 where :meth:`decode_step` appends a position per step
        (TensorFlow, PyTorch) and ``CACHE_LENGTH`` on JAX, where it is the most steps
        :meth:`decode_step` may take from these states.
        """
        memory, mask = self.encode_source(source_ids, training=training)
        if cache_length is None:
            cache_length = 0 if shapes_may_change() else CACHE_LENGTH
        elif cache_length and shapes_may_change():
            raise ValueError(
                f"cache_length={cache_length}: on {keras.backend.backend()} the caches grow with "
                "the step and start empty (pass 0 or None)"
            )
        length = int(cache_length)
        batch = ops.shape(memory)[0]
        head_dim = self.embedding_dim // self.num_heads
        states = [memory, mask, ops.zeros((batch, 1), "int32")]
        for layer in self.decoder_layers:
            if not layer.built:  # a model not called yet: build its layers as its first call would
                layer.build((None, 1, self.embedding_dim), tuple(memory.shape))
            cache = ops.zeros((batch, 2, length, self.num_heads, head_dim), memory.dtype)
            states += [cache, layer.source_keys_values(memory)]
        return states

    def search_states(self, source_ids, max_steps: int) -> list:
        """:meth:`encode`'s states for a search of at most ``max_steps`` steps: empty caches
        that grow with the step (TensorFlow, PyTorch), or caches of ``max_steps`` positions (JAX)."""
        return self.encode(source_ids, cache_length=0 if shapes_may_change() else max_steps)

    def decode_step(self, tokens, states):
        """One position: previous tokens ``(B,)`` → ``(logits (B, V), states, attention (B, Tx))``.

        The layers of :meth:`call`, on the position ``step`` only: its keys and values are
        written into each self-attention cache at ``step`` (on TensorFlow and PyTorch appended
        to it), and it attends to the cached positions ``0..step`` and to the source. Memory,
        mask and cross-attention keys and values are returned as given (beam search then
        leaves them in place). The attention is the last decoder layer's cross-attention
        weights averaged over its heads, float32 (see the class docstring); TensorFlow's and
        JAX's compiled searches drop it unless it is asked for.
        """
        memory, mask, step = states[:3]
        index = step[0, 0]  # every row is at the same position
        x = _add_positions(self.target_positions, self.embed_target(tokens[:, None]), start_index=index)  # (B,1,D)
        new_states = [memory, mask, step + 1]
        grow = shapes_may_change()
        last = len(self.decoder_layers) - 1
        with _one_key_softmax():
            for i, layer in enumerate(self.decoder_layers):
                cache, cross = states[3 + 2 * i], states[4 + 2 * i]
                # Growing, the layer appends the position: the cache then holds 0..step exactly.
                x, cache, *attention = layer(
                    x,
                    memory,
                    encoder_padding_mask=mask,
                    self_attention_cache=cache,
                    self_attention_cache_update_index=None if grow else index,
                    cross_attention_cache=cross,
                    return_attention=i == last,
                )
                new_states += [cache, cross]
        return self.readout(x)[:, 0], new_states, attention[0][:, 0]

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "feedforward_units": self.feedforward_units,
            "share_embeddings": self.share_embeddings,
            "scale_source_embedding": self.scale_source_embedding,
            "attention_dropout": self.attention_dropout,
        }
