"""The bidirectional GRU encoder shared by every architecture (RNNsearch §3.1)."""

from __future__ import annotations

import keras
from keras import ops
from keras.src.backend.common import global_state

from keras_memnmt.data.vocab import PAD_ID
from keras_memnmt.layers.base import EncoderOutput
from keras_memnmt.layers.gru import GRUCell
from keras_memnmt.layers.ylstm_encoder import YLSTMEncoderCell


def embedding_initializer(lookup_scale: float = 1.0) -> keras.initializers.Initializer:
    """N(0, 1), as PyTorch's ``nn.Embedding``, for source and target embeddings.

    ``lookup_scale``: the factor the lookups are multiplied by (a tied target embedding's
    ``sqrt(E)``); the rows start at ``N(0, 1 / lookup_scale^2)``, so the lookups are N(0, 1).

    Decision: Keras's default ``uniform(-0.05, 0.05)`` makes ``e_{y_{t-1}}`` about
    20× smaller than the attention context in the decoder's GRU and deep-output
    inputs; on Multi30k (6,000 pairs, 2 epochs, comparison size) it left the
    training loss at 5.76 against 4.20 with N(0, 1).
    """
    return keras.initializers.RandomNormal(stddev=1.0 / lookup_scale)


_SHARING_MAPS = ("shared_objects/id_to_obj_map", "shared_objects/id_to_config_map")


def bidirectional(layer: keras.layers.Layer, **kwargs) -> keras.layers.Bidirectional:
    """``keras.layers.Bidirectional(layer, **kwargs)``, safe to build while a model loads.

    Why not Keras's alone: ``Bidirectional`` clones ``layer`` twice by serializing it, and
    while ``keras.saving.load_model`` runs, Keras's object-sharing scope keys every
    serialized object by ``id()``. ``layer`` and its cell are freed once the clones exist,
    so a later encoder in the same load (an ensemble's next member) can get the same
    addresses and be handed the earlier member's layers: two members silently share a
    GRU, or the constructor fails with "should have different `go_backwards` value".
    Building with the scope suspended makes the clones as they are outside a load.
    """
    saved = {key: global_state.get_global_attribute(key) for key in _SHARING_MAPS}
    try:
        for key in _SHARING_MAPS:
            global_state.set_global_attribute(key, None)
        return keras.layers.Bidirectional(layer, **kwargs)
    finally:
        for key, value in saved.items():
            global_state.set_global_attribute(key, value)


@keras.saving.register_keras_serializable(package="keras_memnmt")
class BidirectionalEncoder(keras.layers.Layer):
    """Embedding + bidirectional GRU, masked over source padding.

    Annotations ``h_j = [→h_j; ←h_j]`` (Bahdanau et al. 2014, §3.1).

    Args:
        vocab_size: source vocabulary size.
        embedding_dim: source embedding size.
        units: GRU units per direction (annotations have ``2 * units``).
        dropout: dropout on the embeddings (training only).
        annotation_dropout: dropout on the annotations ``h_j`` (training only; our
            option, not in the papers: nmtpytorch's ``dropout_ctx``, which its
            Multi30k baselines set to 0.5). The attention keys, the context vectors
            and MemDec's memory initialization all see the dropped annotations; the
            ``summary`` (the decoder's initial state, and the Cho decoder's only view
            of the source, which it therefore leaves unchanged) does not.

    Call arguments:
        source_ids: ``(B, Tx)`` int ids, ``0`` = padding.

    Returns:
        an :class:`~keras_memnmt.layers.EncoderOutput`: ``annotations (B, Tx, 2·units)``,
        ``mask (B, Tx)`` float 1/0, ``summary (B, 2·units)`` = ``[→h_last; ←h_first]``,
        and ``final_states = ([→h_last, ←h_first],)`` (one layer, two directions).
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 256,
        units: int = 256,
        dropout: float = 0.0,
        annotation_dropout: float = 0.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (("vocab_size", vocab_size), ("embedding_dim", embedding_dim), ("units", units)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name, rate in (("dropout", dropout), ("annotation_dropout", annotation_dropout)):
            if not 0.0 <= rate < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {rate}")
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.units = units
        self.dropout = dropout
        self.annotation_dropout = annotation_dropout
        self.embedding = keras.layers.Embedding(
            vocab_size, embedding_dim, name="source_embedding", embeddings_initializer=embedding_initializer()
        )
        self.embedding_dropout = keras.layers.Dropout(dropout)
        self.annotation_dropout_layer = keras.layers.Dropout(annotation_dropout)
        self.birnn = bidirectional(
            # keras.layers.GRU's cell, split by ops.split (layers/gru.py); same weights.
            keras.layers.RNN(GRUCell(units), return_sequences=True, return_state=True, name="gru"),
            name="birnn",
        )

    @property
    def annotation_units(self) -> int:
        """Size of one annotation ``h_j``: both directions."""
        return 2 * self.units

    def build(self, input_shape):
        self.embedding.build(input_shape)
        self.birnn.build(tuple(input_shape) + (self.embedding_dim,))

    def call(self, source_ids, training=False):
        mask = ops.not_equal(source_ids, PAD_ID)  # (B, Tx) bool
        x = self.embedding_dropout(self.embedding(source_ids), training=training)  # (B, Tx, E)
        annotations, forward_h, backward_h = self.birnn(x, mask=mask, training=training)
        summary = ops.concatenate([forward_h, backward_h], axis=-1)  # (B, 2u)
        annotations = self.annotation_dropout_layer(annotations, training=training)  # rate 0: a no-op
        return EncoderOutput(
            annotations, ops.cast(mask, annotations.dtype), summary, final_states=([forward_h, backward_h],)
        )

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "dropout": self.dropout,
            "annotation_dropout": self.annotation_dropout,
        }


@keras.saving.register_keras_serializable(package="keras_memnmt")
class StackedLSTMEncoder(keras.layers.Layer):
    """Embedding + ``num_layers`` unidirectional LSTMs, masked over source padding (Luong
    et al. 2015; Salton et al. 2017 use 4 layers of 1,000).

    Every layer's final ``[h, c]`` is handed over (``final_states``, bottom first), so a
    stacked decoder can start layer ``l`` from encoder layer ``l``. Keras's
    ``keras.layers.LSTM`` runs each layer.

    Args:
        vocab_size: source vocabulary size.
        embedding_dim: source embedding size.
        units: LSTM units of every layer (annotations have ``units``).
        num_layers: stacked layers.
        dropout: dropout on the embeddings (training only).
        layer_dropout: dropout on each layer's output sequence that feeds the layer above
            (the non-recurrent connections; training only).
        annotation_dropout: dropout on the top layer's outputs, the annotations (training
            only; as in :class:`BidirectionalEncoder`).
        bidirectional_bottom: the bottom layer reads the sentence both ways, ``units // 2``
            per direction (GNMT's encoder); its hand-off is ``[h_fwd; h_bwd]``,
            ``[c_fwd; c_bwd]``. ``units`` must then be even.

    Call arguments:
        source_ids: ``(B, Tx)`` int ids, ``0`` = padding.

    Returns:
        an :class:`~keras_memnmt.layers.EncoderOutput`: the top layer's outputs as
        annotations ``(B, Tx, units)``, ``mask (B, Tx)``, ``summary`` = the top layer's
        final ``h``, and ``final_states`` = ``([h_1, c_1], ..., [h_L, c_L])``.
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 256,
        units: int = 256,
        num_layers: int = 2,
        dropout: float = 0.0,
        layer_dropout: float = 0.0,
        annotation_dropout: float = 0.0,
        bidirectional_bottom: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, value in (
            ("vocab_size", vocab_size),
            ("embedding_dim", embedding_dim),
            ("units", units),
            ("num_layers", num_layers),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name, rate in (
            ("dropout", dropout),
            ("layer_dropout", layer_dropout),
            ("annotation_dropout", annotation_dropout),
        ):
            if not 0.0 <= rate < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {rate}")
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.units = units
        self.num_layers = num_layers
        self.dropout = dropout
        self.layer_dropout = layer_dropout
        if bidirectional_bottom and units % 2:
            raise ValueError(f"bidirectional_bottom needs an even units (units // 2 per direction), got {units}")
        self.bidirectional_bottom = bool(bidirectional_bottom)
        self.embedding = keras.layers.Embedding(
            vocab_size, embedding_dim, name="source_embedding", embeddings_initializer=embedding_initializer()
        )
        self.embedding_dropout = keras.layers.Dropout(dropout)
        self.annotation_dropout = annotation_dropout
        self.layer_dropouts = [keras.layers.Dropout(layer_dropout) for _ in range(num_layers - 1)]
        self.layer_dropouts.append(keras.layers.Dropout(annotation_dropout))  # on the annotations
        self.lstms = [
            keras.layers.LSTM(units, return_sequences=True, return_state=True, name=f"lstm_{i}")
            for i in range(num_layers)
        ]
        if self.bidirectional_bottom:
            self.lstms[0] = bidirectional(
                keras.layers.LSTM(units // 2, return_sequences=True, return_state=True), name="lstm_0"
            )

    @property
    def annotation_units(self) -> int:
        return self.units

    def build(self, input_shape):
        self.embedding.build(input_shape)
        for i, lstm in enumerate(self.lstms):
            lstm.build(tuple(input_shape) + (self.embedding_dim if i == 0 else self.units,))

    def call(self, source_ids, training=False):
        mask = ops.not_equal(source_ids, PAD_ID)  # (B, Tx) bool
        x = self.embedding_dropout(self.embedding(source_ids), training=training)  # (B, Tx, E)
        final_states = []
        for lstm, dropout in zip(self.lstms, self.layer_dropouts):
            if isinstance(lstm, keras.layers.Bidirectional):
                x, h_fwd, c_fwd, h_bwd, c_bwd = lstm(x, mask=mask, training=training)
                h, c = ops.concatenate([h_fwd, h_bwd], axis=-1), ops.concatenate([c_fwd, c_bwd], axis=-1)
            else:
                x, h, c = lstm(x, mask=mask, training=training)  # (B, Tx, U), (B, U), (B, U)
            final_states.append([h, c])
            x = dropout(x, training=training)
        return EncoderOutput(x, ops.cast(mask, x.dtype), final_states[-1][0], tuple(final_states))

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "embedding_dim": self.embedding_dim,
            "units": self.units,
            "num_layers": self.num_layers,
            "dropout": self.dropout,
            "layer_dropout": self.layer_dropout,
            "annotation_dropout": self.annotation_dropout,
            "bidirectional_bottom": self.bidirectional_bottom,
        }


@keras.saving.register_keras_serializable(package="keras_memnmt")
class YLSTMEncoder(keras.layers.Layer):
    """The Y-LSTM encoder (Bradbury & Socher 2016, §2.1): a stacked-LSTM language model over
    the source whose tracker's states are the encoding.

    Embedding, then :class:`~keras_memnmt.layers.YLSTMEncoderCell` inside ``keras.layers.RNN``
    (masked over padding). The top output ``h^L_s`` feeds a softmax (``lm_output``) that
    predicts the next source token; in training, when ``lm_weight > 0``, the layer adds
    ``lm_weight`` times that language model's mean cross-entropy over the real next tokens
    as a loss (``add_loss``; the paper sums it with the translation loss, weight 1).

    Args:
        vocab_size: source vocabulary size.
        embedding_dim: source embedding size.
        units: LSTM units of every layer.
        num_layers, tracker_layer, tracker_units, layer_dropout: see the cell.
        dropout: dropout on the embeddings (training only).
        lm_weight: float >= 0, the language-model loss's weight (0: no softmax, no loss).
        lm_warmup_steps: int >= 0, training steps over which the weight rises linearly from
            ``lm_weight / lm_warmup_steps`` to ``lm_weight`` (0: ``lm_weight`` from the first
            step, the paper's sum). The
            steps are counted by a non-trainable weight, ``lm_steps``, saved with the
            model (it exists only when this is > 0).
        seed: optional int, seed of the dropout masks.
        tracker_reads_masked: the tracker reads layer m's output after its dropout mask
            (default True) or before it.

    Call arguments:
        source_ids: ``(B, Tx)`` int ids, ``0`` = padding.

    Returns:
        an :class:`~keras_memnmt.layers.EncoderOutput`: annotations ``[H; C]``
        ``(B, Tx, 2*tracker_units)`` (the tracker's hidden and memory states at every step),
        ``mask (B, Tx)``, no summary and no final states (the only path to the decoder is
        its attention over ``H`` and ``C``).
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int = 256,
        units: int = 256,
        num_layers: int = 5,
        tracker_layer: int = 3,
        tracker_units: int | None = None,
        dropout: float = 0.0,
        layer_dropout: float = 0.0,
        lm_weight: float = 1.0,
        lm_warmup_steps: int = 0,
        seed: int | None = None,
        tracker_reads_masked: bool = True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"vocab_size must be a positive integer, got {vocab_size!r}")
        if not lm_weight >= 0.0:
            raise ValueError(f"lm_weight must be >= 0, got {lm_weight!r}")
        if not isinstance(lm_warmup_steps, int) or isinstance(lm_warmup_steps, bool) or lm_warmup_steps < 0:
            raise ValueError(f"lm_warmup_steps must be an integer >= 0, got {lm_warmup_steps!r}")
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.dropout = dropout
        self.lm_weight = float(lm_weight)
        self.lm_warmup_steps = lm_warmup_steps
        self.seed = seed
        self.cell = YLSTMEncoderCell(
            units,
            num_layers,
            tracker_layer,
            tracker_units,
            layer_dropout,
            tracker_reads_masked=tracker_reads_masked,
            seed=seed,
            dtype=self.dtype_policy,
            name="cell",
        )
        self.embedding = keras.layers.Embedding(
            vocab_size, embedding_dim, name="source_embedding", embeddings_initializer=embedding_initializer()
        )
        self.embedding_dropout = keras.layers.Dropout(dropout)
        self.rnn = keras.layers.RNN(self.cell, return_sequences=True, name="rnn")
        self.lm_output = keras.layers.Dense(vocab_size, name="lm_output") if self.lm_weight > 0 else None

    @property
    def annotation_units(self) -> int:
        return 2 * self.cell.tracker_units

    def build(self, input_shape):
        self.embedding.build(input_shape)
        self.rnn.build(tuple(input_shape) + (self.embedding_dim,))
        if self.lm_output is not None:
            self.lm_output.build((None, None, self.cell.units))
            if self.lm_warmup_steps:
                self.lm_steps = self.add_weight(
                    shape=(), initializer="zeros", dtype="float32", trainable=False, name="lm_steps"
                )

    def call(self, source_ids, training=False):
        mask = ops.not_equal(source_ids, PAD_ID)  # (B, Tx) bool
        x = self.embedding_dropout(self.embedding(source_ids), training=training)  # (B, Tx, E)
        states = self.cell.initial_states(ops.shape(source_ids)[0], training=training)
        outputs = self.rnn(x, initial_state=states, mask=mask, training=training)  # (B, Tx, U + 2T)
        units = self.cell.units
        if training and self.lm_output is not None:
            self.add_loss(self.current_lm_weight(count=True) * self.lm_loss(outputs[:, :, :units], source_ids))
        return EncoderOutput(outputs[:, :, units:], ops.cast(mask, outputs.dtype))

    def current_lm_weight(self, count: bool = False):
        """The language model's weight at this training step: ``lm_weight``, or during the
        warm-up ``lm_weight * steps / lm_warmup_steps`` (``steps`` counting this one);
        ``count``: count one more step first (the layer does, once per training call)."""
        if not self.lm_warmup_steps:
            return self.lm_weight
        if count:
            self.lm_steps.assign(self.lm_steps.value + 1.0)
        return self.lm_weight * ops.minimum(self.lm_steps.value / float(self.lm_warmup_steps), 1.0)

    def lm_loss(self, top, source_ids):
        """The language model's mean cross-entropy: ``h^L_s`` predicts token ``s + 1``, over the
        positions whose next token is real (not padding)."""
        logits = ops.cast(self.lm_output(top[:, :-1]), "float32")  # (B, Tx-1, V)
        targets = source_ids[:, 1:]
        weights = ops.cast(ops.not_equal(targets, PAD_ID), "float32")
        losses = keras.losses.sparse_categorical_crossentropy(targets, logits, from_logits=True)
        return ops.sum(losses * weights) / ops.maximum(ops.sum(weights), 1.0)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "embedding_dim": self.embedding_dim,
            "units": self.cell.units,
            **self.cell.tracked_config(),
            "dropout": self.dropout,
            "lm_weight": self.lm_weight,
            "lm_warmup_steps": self.lm_warmup_steps,
            "seed": self.seed,
        }
