"""The recurrent base: a decoder cell run by ``keras.layers.RNN``.

One encoder, one decoder cell, one loop: ``call`` runs the cell inside
``keras.layers.RNN`` (teacher forcing) and ``decode_step`` runs the same cell's single
step for greedy and beam search, so a cell's equations live in exactly one place (its
``_step``).

- :class:`RecurrentEncoderDecoder`: the cell of :meth:`~RecurrentEncoderDecoder.make_cell`
  (a :class:`~keras_memnmt.layers.DecoderCell`, which turns the encoder's
  :class:`~keras_memnmt.layers.EncoderOutput` into its initial states), the encoder and
  decoder sizes and the deep output's dropout. Its default encoder is the bidirectional
  GRU (:class:`~keras_memnmt.layers.BidirectionalEncoder`).
- :class:`Seq2Seq`: the same with the options of a source attention over the
  annotations (``attention_remat``, ``annotation_dropout``), the base of every library
  model whose decoder attends over the annotations.
"""

from __future__ import annotations

from typing import Any, ClassVar

import keras

from keras_memnmt.layers.base import DecoderCell, EncoderOutput
from keras_memnmt.layers.bidirectional_encoder import BidirectionalEncoder
from keras_memnmt.models.base import EncoderDecoder


class RecurrentEncoderDecoder(EncoderDecoder):
    """:class:`~keras_memnmt.models.EncoderDecoder` whose decoder is a cell inside
    ``keras.layers.RNN``: subclasses say which cell (and encoder) to build.

    Args (beyond :class:`~keras_memnmt.models.EncoderDecoder`):
        encoder_units: GRU units per encoder direction (the default encoder), or the
            encoder's size.
        decoder_units: decoder state size.
        output_dropout: dropout on the deep-output layer (RNNsearch paper: 0.5).

    Tying (``tie_embeddings``) makes the cell's deep output project with the target
    embedding: it needs the cell's ``readout_units == embedding_dim``.
    """

    free_options: tuple[str, ...] = (*EncoderDecoder.free_options, "output_dropout")
    tiny_options: ClassVar[dict[str, Any]] = {
        "embedding_dim": 8,
        "encoder_units": 6,
        "decoder_units": 10,
        "output_dropout": 0.0,
    }

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        encoder_units: int = 256,
        decoder_units: int = 512,
        output_dropout: float = 0.5,
        **kwargs,
    ):
        self.encoder_units = encoder_units
        self.decoder_units = decoder_units
        self.output_dropout = output_dropout
        super().__init__(source_vocab_size, target_vocab_size, **kwargs)

    def make_encoder(self) -> keras.layers.Layer:
        """The encoder: a layer with ``annotation_units`` whose call ``(source_ids, training)``
        returns an ``EncoderOutput``.

        Default: the bidirectional GRU encoder (:class:`BidirectionalEncoder`). Called
        once in ``__init__``, after the options are set and before ``make_cell``.
        """
        return BidirectionalEncoder(
            self.source_vocab_size, self.embedding_dim, self.encoder_units, self.dropout, name="encoder"
        )

    def make_decoder(self) -> None:
        """The cell of :meth:`make_cell` (``self.cell``), run over the target by
        ``keras.layers.RNN`` (``self.decoder_rnn``)."""
        self.cell = self.make_cell()
        if self.tie_embeddings and self.cell.readout_units != self.embedding_dim:
            raise ValueError(
                f"tie_embeddings needs readout_units == embedding_dim, got "
                f"readout_units={self.cell.readout_units}, embedding_dim={self.embedding_dim}"
            )
        self.decoder_rnn = keras.layers.RNN(self.cell, return_sequences=True, name="decoder")

    def make_cell(self) -> DecoderCell:
        """The decoder cell (see keras_memnmt/layers); subclasses override this.

        ``self.encoder.annotation_units`` is the size of the annotations it receives.
        """
        raise NotImplementedError(f"{type(self).__name__} must define make_cell()")

    def encode(self, source_ids, training=False) -> list:
        """Source ids → the cell's initial states (all 2-D, batch first)."""
        encoded = self.encoder(source_ids, training=training)
        if not isinstance(encoded, EncoderOutput):
            raise TypeError(
                f"{type(self.encoder).__name__} returned {type(encoded).__name__}; an encoder returns an EncoderOutput"
            )
        # `training` reaches cells with a stochastic start (MemDec's Eq. 14 memory noise).
        return list(self.cell.initial_states(encoded, training=training))

    def call(self, inputs, training=False):
        source_ids, target_in = inputs
        states = self.encode(source_ids, training=training)
        outputs = self.decode_sequence(target_in, states, training=training)  # (B,T,O)
        return self.readout(outputs, training=training)  # (B, T, V)

    def decode_sequence(self, target_in, states, training=False):
        """Teacher-forced decoder loop: target ids ``(B, T)`` and initial states → outputs ``(B, T, O)``."""
        embedded = self.target_dropout(self.embed_target(target_in), training=training)  # (B,T,E)
        embedded = self.cell.drop_inputs(embedded, training=training)  # the cell's own, if any
        inputs = self.cell.prepare_inputs(embedded, target_in)  # the cell's own lookups, if any
        inputs = self.cell.project_inputs(inputs)  # + its input side, for the whole sequence at once
        with self.cell.outside_the_loop():  # the kernel slices the loop reads, sliced once
            return self.decoder_rnn(inputs, initial_state=list(states), training=training)

    def decode_step(self, tokens, states):
        """One decoding step: previous tokens ``(B,)`` → ``(logits (B,V), states, attention)``.

        The same ``cell.step`` and :meth:`readout` that ``call`` runs in training.
        """
        inputs = self.cell.prepare_inputs(self.embed_target(tokens), tokens)  # (B, E) or more
        output, new_states, attention = self.cell.step(inputs, states, training=False)
        return self.readout(output, training=False), list(new_states), attention

    def step_details(self, tokens, states) -> dict:
        """The cell's ``step_details`` (the same ``_step`` as :meth:`decode_step`) on the
        embedded ``tokens``, with the "logits" of its output."""
        inputs = self.cell.prepare_inputs(self.embed_target(tokens), tokens)
        details = self.cell.step_details(inputs, states)
        return {**details, "logits": self.readout(details["output"], training=False)}

    def readout(self, outputs, training=False):
        """The cell's deep output (Eq. 9), given the target embedding when the output is tied."""
        tied = self.target_embedding if self.tie_embeddings else None
        return self.cell.readout(outputs, training=training, output_embedding=tied)

    def gru_encoder_macs(self) -> int:
        """Per source token: the default encoder's two GRU directions (3 gates, ``h`` units each)."""
        e, h = self.embedding_dim, self.encoder_units
        return 2 * 3 * h * (e + h)

    def deep_output_macs(self, inputs: int) -> int:
        """Per target token: a deep output of ``readout_units`` reading ``inputs`` features,
        then the output layer over the target vocabulary (``readout_units x V``)."""
        return self.readout_units * inputs + self.readout_units * self.target_vocab_size

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "encoder_units": self.encoder_units,
            "decoder_units": self.decoder_units,
            "output_dropout": self.output_dropout,
        }


class Seq2Seq(RecurrentEncoderDecoder):
    """:class:`RecurrentEncoderDecoder` whose decoder attends over the encoder's
    annotations, with the options of that attention.

    Args (beyond :class:`RecurrentEncoderDecoder`):
        attention_remat: recompute the source attention's ``(B, Tx, A)`` tanh in the
            backward pass instead of keeping one per target step (``keras.remat``, see
            :class:`~keras_memnmt.layers.AdditiveAttention`); less training memory, the
            same values. The model passes it to its cell.
        annotation_dropout: dropout on the encoder's annotations (training only; see
            :class:`~keras_memnmt.layers.BidirectionalEncoder`). The default
            encoder applies it; a model with an encoder of its own passes it on.
    """

    free_options: tuple[str, ...] = (*RecurrentEncoderDecoder.free_options, "annotation_dropout", "attention_remat")

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        attention_remat: bool = True,
        annotation_dropout: float = 0.0,
        **kwargs,
    ):
        self.attention_remat = attention_remat
        self.annotation_dropout = annotation_dropout
        super().__init__(source_vocab_size, target_vocab_size, **kwargs)

    def make_encoder(self) -> keras.layers.Layer:
        """The bidirectional GRU encoder, its annotations dropped at ``annotation_dropout``."""
        return BidirectionalEncoder(
            self.source_vocab_size,
            self.embedding_dim,
            self.encoder_units,
            self.dropout,
            annotation_dropout=self.annotation_dropout,
            name="encoder",
        )

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "attention_remat": self.attention_remat,
            "annotation_dropout": self.annotation_dropout,
        }
