"""The Y-LSTM encoder (Bradbury & Socher 2016, §2.1): its cell, one step of the source
language model whose middle layer is joined to a tracker LSTM whose states are the
encoding, and the encoder layer that runs the cell over the source."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers.base import EncoderOutput
from keras_memnmt.layers.embedding import embedding_initializer
from keras_memnmt.layers.tracked import TrackedStack
from keras_memnmt.tokens import PAD_ID


@keras.saving.register_keras_serializable(package="keras_memnmt")
class YLSTMEncoderCell(TrackedStack, keras.layers.Layer):
    """One source step of the Y-LSTM encoder, a stacked-LSTM language model with a tracker
    (see :class:`~keras_memnmt.layers.tracked.TrackedStack` for the equations).

    The step outputs ``[h^L_s; h^tracker_s; k^tracker_s]``: the top output (for the
    next-source-token softmax) and the tracker's hidden and memory states, which the
    encoder keeps at every step as the matrices ``H`` and ``C``.

    States: ``[output, h^1, k^1, ..., h^L, k^L, h^tracker, k^tracker, masks]`` (2-D each):
    the step's output comes first (the Keras 3 cell contract: JAX's masked loop holds the
    previous output in a state of the output's shape), and the masks ``(B, L*units)`` are
    the dropout masks, passed through unchanged. Under a mixed policy every state and the
    output are in the compute dtype (nothing is kept in float32).

    Args:
        units: int, LSTM size of every layer.
        num_layers: int, stacked layers (paper: 5).
        tracker_layer: int, the layer (1-based) the tracker is attached to (paper: 3).
        tracker_units: int or None, the tracker's size (None: ``units``).
        layer_dropout: float in [0, 1), dropout between layers (the masks come in the state).
        kernel_initializer, recurrent_initializer, bias_initializer: the LSTMs' initializers.
        seed: optional int, seed of the dropout masks.

    Call arguments: ``inputs (B, E)`` source embeddings, ``states``, ``training``.

    Returns: ``(output (B, units + 2*tracker_units), new_states)``.
    """

    def __init__(
        self,
        units: int,
        num_layers: int = 5,
        tracker_layer: int = 3,
        tracker_units: int | None = None,
        layer_dropout: float = 0.0,
        tracker_reads_masked: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        recurrent_initializer: Any = "orthogonal",
        bias_initializer: Any = "zeros",
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(units, int) or units < 1:
            raise ValueError(f"`units` must be a positive integer, got units={units!r}")
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.init_tracked_stack(num_layers, tracker_layer, tracker_units, layer_dropout, tracker_reads_masked)

    @property
    def state_size(self) -> list:
        return [self.output_size, *self.tracked_state_size]

    @property
    def output_size(self) -> int:
        return self.units + 2 * self.tracker_units

    def build(self, input_shape: tuple) -> None:
        self.build_tracked_stack(int(input_shape[-1]))
        self.built = True

    def initial_states(self, batch: Any, training: bool = False) -> list:
        """A zero output, zero LSTM and tracker states, and this sequence's dropout masks."""
        zeros = [ops.zeros((batch, size), self.compute_dtype) for size in self.state_size[:-1]]
        return [*zeros, self.layer_masks(batch, training=training)]

    def get_initial_state(self, batch_size: int | None = None) -> list:
        return self.initial_states(batch_size)

    def call(self, inputs: Any, states: list, training: bool = False) -> tuple:
        layers = 2 * self.num_layers
        states = states[1:]  # the previous output is not read
        masks = states[layers + 2]
        top, lstm_states, tracker = self.tracked_step(inputs, states[:layers], states[layers : layers + 2], masks)
        output = ops.concatenate([top, *tracker], axis=-1)
        return output, [output, *lstm_states, *tracker, masks]

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "units": self.units,
            **self.tracked_config(),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "seed": self.seed,
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
