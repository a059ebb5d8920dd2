"""The decoder-cell contract: what an encoder hands over, and the base class of every cell.

Every architecture is an encoder, a decoder cell and a readout. The encoder
returns an :class:`EncoderOutput`; the cell turns it into its initial states
(:meth:`DecoderCell.initial_states`) and then runs one step at a time
(:meth:`DecoderCell.step`), inside ``keras.layers.RNN`` for teacher-forced
training and called directly by greedy and beam search. A cell's ``_step`` is the
only place its equations live: ``step``, ``call`` and :meth:`DecoderCell.step_details`
(which also returns the named values the step computed on the way: attention, memory
addressing) all run it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import keras
from keras import ops

from keras_memnmt.layers._checks import check_bool, check_positive_int, check_rate


class EncoderOutput(NamedTuple):
    """What an encoder hands to the decoder cell (all batch first).

    Attributes:
        annotations: ``(B, Tx, D)`` one vector per source position (``D`` is the
            encoder's ``annotation_units``); what attention reads.
        mask: ``(B, Tx)`` float 1/0, 1 for real source tokens.
        summary: ``(B, S)`` or None, a fixed-size sentence vector (the
            bidirectional encoder's ``[→h_last; ←h_first]``).
        final_states: one entry per encoder layer, bottom first, each the list of
            that layer's final states (``[h]`` for a GRU, ``[h, c]`` for an LSTM,
            ``[h_fwd, h_bwd]`` for a bidirectional GRU), so that a stacked decoder
            can start layer ``l`` from encoder layer ``l`` (the Luong hand-off).
    """

    annotations: Any
    mask: Any
    summary: Any = None
    final_states: tuple = ()


class DecoderCell(keras.layers.Layer):
    """Base class of the decoder cells: argument checks, dropout, states helpers, config.

    A subclass defines, in this order of importance:

    - ``_step(inputs, states, training) -> (output, new_states, details)``: one
      decoder step, the only place its equations live. ``inputs`` is the
      ``(B, E)`` embedding of the previous target word; ``details`` is a dict of
      named values the step computed, "attention" ``(B, Tx)`` for a cell with
      source attention (see :meth:`step_details` for the names). A cell may define
      ``step(inputs, states, training) -> (output, new_states, attention)``
      instead; its details are then the attention alone.
    - ``initial_states_from(encoded, training) -> list``: the step's initial
      states from an :class:`EncoderOutput`, every one 2-D ``(B, features)``
      with the output-shaped state first (the Keras 3 cell contract).
    - ``state_size``, ``compute_output_size(embedding_dim)``, ``build(input_shape)``
      (call ``self.set_embedding_dim(input_shape)`` first) and a ``deep_output``
      sublayer (``readout``), plus ``get_config`` for its own arguments.

    Mixed precision (a ``mixed_float16`` or ``mixed_bfloat16`` policy): every state is in
    the cell's compute dtype, initial states included (``keras.layers.RNN`` casts the
    initial states to it, and its loop, like the searches', needs each step to return
    states of the dtype it was given); a value a step computes in float32 (a softmax, a
    memory update) is cast back before it becomes a state. The weights stay float32.

    The base supplies ``step`` and ``step_details`` (both run ``_step``), ``call``
    (``keras.layers.RNN``'s entry: ``step`` without the attention), ``prepare_inputs`` (the step's inputs from the embeddings and ids;
    the embeddings unless a cell overrides it), ``initial_states`` (accepts an :class:`EncoderOutput` or the
    tensors), ``readout``, ``output_size``, ``drop_inputs`` and ``get_config``
    of the arguments below.

    Args:
        units: int, size of the decoder state ``s_t``.
        target_vocab_size: int, number of output logits.
        readout_units: int, size of the deep-output layer.
        annotation_units: int, size ``D`` of an encoder annotation (or summary).
        output_dropout: float in [0, 1), dropout in the readout.
        tied_output: bool, the readout's output kernel is the target embedding
            matrix, passed to ``readout(..., output_embedding=)``.
        dropout: float in [0, 1), variational dropout on the input embeddings: one
            mask per sequence, applied to the whole ``(B, T, E)`` input by
            :meth:`drop_inputs` before the loop (the models do; a direct user of
            ``keras.layers.RNN(cell)`` calls it). Drawing the mask outside the loop
            is what keeps it one mask per sequence under JAX's scan without Keras's
            private ``DropoutRNNCell``.
        kernel_initializer: initializer of the input kernels.
        recurrent_initializer: initializer of the recurrent kernels.
        bias_initializer: initializer of the biases.
        seed: optional int, seed of the dropouts (and of any random state the
            subclass draws).
        **kwargs: base ``keras.layers.Layer`` arguments.
    """

    def __init__(
        self,
        units: int,
        target_vocab_size: int,
        readout_units: int,
        annotation_units: int,
        output_dropout: float = 0.5,
        tied_output: bool = False,
        dropout: float = 0.0,
        kernel_initializer: Any = "glorot_uniform",
        recurrent_initializer: Any = "orthogonal",
        bias_initializer: Any = "zeros",
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        self.target_vocab_size = check_positive_int("target_vocab_size", target_vocab_size)
        self.readout_units = check_positive_int("readout_units", readout_units)
        self.annotation_units = check_positive_int("annotation_units", annotation_units)
        self.output_dropout = check_rate("output_dropout", output_dropout)
        self.tied_output = check_bool("tied_output", tied_output)
        self.dropout = check_rate("dropout", dropout)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self._embedding_dim: int | None = None

    # ------------------------------------------------------- subclass contract
    def _step(self, inputs: Any, states: list, training: bool = False) -> tuple:
        """One decoder step: ``(output (B, output_size), new_states, details dict)``.

        The default runs a subclass's own ``step`` (the older contract) and reports its
        attention as the only detail.
        """
        if type(self).step is DecoderCell.step:
            raise NotImplementedError(f"{type(self).__name__} must define _step() or step()")
        output, new_states, attention = self.step(inputs, states, training=training)
        return output, new_states, {} if attention is None else {"attention": attention}

    def step(self, inputs: Any, states: list, training: bool = False) -> tuple:
        """One decoder step: ``(output (B, output_size), new_states, attention (B, Tx) or None)``."""
        output, new_states, details = self._step(inputs, states, training=training)
        return output, new_states, details.get("attention")

    def step_details(self, inputs: Any, states: list, training: bool = False) -> dict:
        """One decoder step with the named values it computed (the same ``_step`` as ``step``).

        Returns:
            dict with "output" ``(B, output_size)``, "states" (the new states) and the
            cell's details. Names shared by the cells (a cell has those it computes):

            - "attention" ``(B, Tx)``: the source attention (Y-LSTM: over the
              encoder's tracker states, one per source position);
            - "read_weights", "write_weights" ``(B, n)``: MemDec's memory addressing,
              and "erase_mean", "add_mean" ``(B,)``: the mean of its erase and add
              vectors (:class:`~keras_memnmt.layers.MemDecCell` has more);
            - "memory_attention" ``(B, memory_size)``: RMN's attention over the most
              recent target words, slot 0 the newest (``y_{t-1}``);
            - "past_attention" ``(B, history_length)``: Attentive NMT's attention over
              its past top states, slot 0 the most recent.

            The weights sum to 1 over their last axis, except Attentive NMT's at the
            first step, which has no past states to attend to (all 0).
        """
        output, new_states, details = self._step(inputs, states, training=training)
        return {"output": output, "states": list(new_states), **details}

    def initial_states_from(self, encoded: EncoderOutput, training: bool = False) -> list:
        """The step's initial states (2-D each) from what the encoder handed over."""
        raise NotImplementedError(f"{type(self).__name__} must define initial_states_from()")

    def compute_output_size(self, embedding_dim: int) -> int:
        """The size of one step's output for input embeddings of size ``embedding_dim``."""
        raise NotImplementedError(f"{type(self).__name__} must define compute_output_size()")

    # --------------------------------------------------------------- provided
    def set_embedding_dim(self, input_shape: tuple) -> int:
        """Records ``E`` from the step's ``input_shape = (B, E)`` (call it first in ``build``)."""
        self._embedding_dim = int(input_shape[-1])
        return self._embedding_dim

    @property
    def output_size(self) -> int:
        """``compute_output_size(E)``; ``E`` is known once the cell is built."""
        if self._embedding_dim is None:
            raise ValueError(
                f"{self.__class__.__name__} '{self.name}': output_size needs the "
                "embedding size; build the cell first (keras.layers.RNN does)."
            )
        return self.compute_output_size(self._embedding_dim)

    def initial_states(
        self,
        encoded: EncoderOutput | Any,
        source_mask: Any | None = None,
        summary: Any | None = None,
        training: bool = False,
    ) -> list:
        """The decoder's initial states, passed to ``keras.layers.RNN`` as ``initial_state=``.

        Args:
            encoded: an :class:`EncoderOutput`, or the ``(B, Tx, D)`` annotations
                (then ``source_mask`` and ``summary`` are the other two fields).
            source_mask: ``(B, Tx)`` 1/0, with annotations given directly.
            summary: ``(B, S)`` or None, with annotations given directly.
            training: bool; cells with a stochastic start draw it only in training.
        """
        if not isinstance(encoded, EncoderOutput):
            encoded = EncoderOutput(encoded, source_mask, summary)
        return self.initial_states_from(encoded, training=training)

    def prepare_inputs(self, embedded: Any, tokens: Any) -> Any:
        """The step's inputs from the target embeddings ``(B, [T,] E)`` and their ids ``(B, [T])``.

        Called on the whole sequence before the loop in training (after
        :meth:`drop_inputs`) and on each step's tokens in decoding. Default: the
        embeddings. A cell with lookups of its own (RMN's memory embeddings) appends
        them here, outside the loop.
        """
        return embedded

    def call(self, inputs: Any, states: list, training: bool = False) -> tuple:
        """``keras.layers.RNN``'s entry point: ``step`` without the attention weights."""
        output, new_states, _ = self.step(inputs, states, training=training)
        return output, new_states

    def readout(self, outputs: Any, training: bool = False, output_embedding: Any = None) -> Any:
        """Deep output: ``(..., output_size) -> (..., target_vocab_size)`` logits.

        Applied to the whole ``(B, T, ·)`` sequence in training and per step in
        decoding. ``output_embedding``: the target ``ReversibleEmbedding``, given
        exactly when the cell was built with ``tied_output=True``.
        """
        return self.deep_output(outputs, training=training, output_embedding=output_embedding)

    def drop_inputs(self, inputs: Any, training: bool = False) -> Any:
        """Variational dropout of the ``(B, T, E)`` input embeddings: one mask per sequence."""
        if not training or self.dropout == 0.0:
            return inputs
        shape = ops.shape(inputs)
        mask = keras.random.dropout(
            ops.ones((shape[0], 1, shape[2]), inputs.dtype), self.dropout, seed=self.seed_generator
        )  # (B, 1, E), broadcast over time
        return inputs * mask

    def get_initial_state(self, batch_size: int | None = None) -> list:
        raise ValueError(
            f"{self.__class__.__name__} needs the encoder output: pass "
            "`initial_state=cell.initial_states(encoder_output)` to keras.layers.RNN."
        )

    # ----------------------------------------------------------- helpers
    @staticmethod
    def masked_mean(annotations: Any, mask: Any) -> Any:
        """``(B, Tx, D), (B, Tx) -> (B, D)``: the mean over the unmasked positions, summed in
        float32 and returned in the dtype of ``annotations``."""
        dtype = keras.backend.standardize_dtype(annotations.dtype)
        mask = ops.cast(mask, "float32")
        total = ops.sum(ops.cast(annotations, "float32") * ops.expand_dims(mask, -1), axis=1)  # (B, D)
        count = ops.maximum(ops.sum(mask, axis=1, keepdims=True), 1.0)  # (B, 1)
        return ops.cast(total / count, dtype)

    @staticmethod
    def flatten(x: Any) -> Any:
        """``(B, Tx, F) -> (B, Tx*F)``: a per-position tensor carried as a 2-D state."""
        return ops.reshape(x, (ops.shape(x)[0], -1))

    @staticmethod
    def push_window(window: Any, new: Any) -> Any:
        """``(B, n*F), (B, F) -> (B, n*F)``: ``new`` enters slot 0 of a newest-first window
        of ``n`` slots and the oldest slot leaves (a fixed-size history as a 2-D state)."""
        return ops.concatenate([new, window[:, : int(window.shape[-1]) - int(new.shape[-1])]], axis=-1)

    @staticmethod
    def unflatten(x: Any, mask: Any, features: int) -> Any:
        """``(B, Tx*F) -> (B, Tx, F)``, with ``Tx`` read from the ``(B, Tx)`` mask state."""
        return ops.reshape(x, (-1, ops.shape(mask)[1], features))

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "target_vocab_size": self.target_vocab_size,
                "readout_units": self.readout_units,
                "annotation_units": self.annotation_units,
                "output_dropout": self.output_dropout,
                "tied_output": self.tied_output,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "seed": self.seed,
            }
        )
        return config
