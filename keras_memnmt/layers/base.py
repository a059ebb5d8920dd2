"""The decoder-cell contract: what an encoder hands over, and the base class of every cell.

Every architecture is an encoder, a decoder cell and a readout. The encoder
returns an :class:`EncoderOutput`; the cell turns it into its initial states
(:meth:`DecoderCell.initial_states`) and then runs one step at a time
(:meth:`DecoderCell.step`), inside ``keras.layers.RNN`` for teacher-forced
training and called directly by greedy and beam search. A cell's ``_step`` is the
only place its equations live: ``step``, ``call`` and :meth:`DecoderCell.step_details`
(which also returns the named values the step computed on the way: attention, memory
addressing) all run it. The library's cells write it as two halves, ``input_side``
(the products with the previous word's embedding, which teacher forcing computes for
the whole sequence before the loop: ``project_inputs``) and ``_recurrent_step``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
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
        self._step_input_dim: int | None = None  # the step's input features (RMN: E + 2d)
        self.__dict__["_hoisted_weights"] = None  # see outside_the_loop (not a tracked attribute)

    # ------------------------------------------------------- subclass contract
    def _step(self, inputs: Any, states: list, training: bool = False) -> tuple:
        """One decoder step: ``(output (B, output_size), new_states, details dict)``.

        The default composes a cell's two halves when it has an input side
        (``projection_size > 0``): ``_recurrent_step(inputs, input_side(inputs), states)``.
        Otherwise it runs a subclass's own ``step`` (the older contract) and reports its
        attention as the only detail.
        """
        if self.projection_size:
            return self._recurrent_step(inputs, self.input_side(inputs), states, training=training)
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

    @property
    def projection_size(self) -> int:
        """Features :meth:`input_side` returns per position; 0 (the default): the cell has
        no input side and its ``_step`` (or ``step``) does all the work."""
        return 0

    def input_side(self, inputs: Any) -> Any:
        """The step's products with what depends on ``y_{t-1}`` alone: ``(B, [T,] F)`` step
        inputs to ``(B, [T,] projection_size)`` (the word embedding's rows of each kernel
        that reads it, plus that kernel's input bias).

        Teacher forcing knows every ``y_{t-1}`` before the loop, so :meth:`project_inputs`
        computes these for the whole sequence as one ``(B·T) × F`` matmul per kernel, and
        the loop runs only :meth:`_recurrent_step`; decoding, one token at a time, computes
        them in ``_step``. Only with ``projection_size > 0``.
        """
        raise NotImplementedError(f"{type(self).__name__} has no input side (projection_size=0)")

    def _recurrent_step(self, inputs: Any, products: Any, states: list, training: bool = False) -> tuple:
        """The step given its input side: ``_step``'s result from the step inputs ``(B, F)``
        and ``products = input_side(inputs)`` ``(B, projection_size)``. The cell's equations
        live in :meth:`input_side` and here; ``_step`` composes the two."""
        raise NotImplementedError(f"{type(self).__name__} must define _recurrent_step()")

    def loop_weights(self) -> dict:
        """The weights ``_recurrent_step`` reads as slices of a kernel (the rows that multiply
        what it concatenates in the loop, in the compute dtype), by name; ``{}`` by default.
        ``_recurrent_step`` gets them from :meth:`step_weights`."""
        return {}

    def step_weights(self) -> dict:
        """:meth:`loop_weights`, computed once by :meth:`outside_the_loop` when inside it, else now."""
        hoisted = self.__dict__["_hoisted_weights"]
        return self.loop_weights() if hoisted is None else hoisted

    @contextlib.contextmanager
    def outside_the_loop(self) -> Iterator[None]:
        """Computes :meth:`loop_weights` once, here, for the ``keras.layers.RNN`` loop run inside.

        Sliced inside the loop, a kernel would be copied at every step, and on TensorFlow
        the gradient of each slice writes a zero-padded copy of the whole kernel: an
        RNNsearch training step measured 15% slower that way than with the concatenated
        inputs. Sliced once outside, the loop reads the slices as loop constants and their
        gradients are summed before one slice gradient. The models run their decoder
        ``keras.layers.RNN`` inside it; anything else gets the same numbers, slicing per step.
        """
        self.__dict__["_hoisted_weights"] = self.loop_weights()
        try:
            yield
        finally:
            self.__dict__["_hoisted_weights"] = None

    def kernel_rows(self, kernel: Any, start: int, stop: int | None = None) -> Any:
        """``kernel[start:stop]`` in the compute dtype (for :meth:`loop_weights`)."""
        return ops.cast(kernel, self.compute_dtype)[start:stop]

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
        self._step_input_dim = self._embedding_dim
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

    def project_inputs(self, inputs: Any) -> Any:
        """``(B, T, F)`` step inputs to what ``keras.layers.RNN(cell)`` runs on in training:
        ``[inputs; input_side(inputs)]`` over the whole sequence (the inputs themselves for
        a cell without an input side). Builds the cell from ``inputs`` if needed."""
        if not self.projection_size:
            return inputs
        if not self.built:
            self.build((None, int(inputs.shape[-1])))
        return ops.concatenate([inputs, self.input_side(inputs)], axis=-1)

    def call(self, inputs: Any, states: list, training: bool = False) -> tuple:
        """``keras.layers.RNN``'s entry point: ``step`` without the attention weights.

        Given :meth:`project_inputs`' output (the step inputs and their input side, one
        position), it runs :meth:`_recurrent_step` on them; given the step inputs alone,
        the whole ``_step``.
        """
        width, size = int(inputs.shape[-1]), self.projection_size
        if size and width == self._step_input_dim + size:
            # Slices, not ops.split: PyTorch's split with split points fails on the "meta"
            # device Keras builds models on.
            step_inputs = inputs[:, : self._step_input_dim]
            products = inputs[:, self._step_input_dim :]
            output, new_states, _ = self._recurrent_step(step_inputs, products, states, training=training)
        else:
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
    def rows_product(x: Any, kernel: Any, start: int, stop: int | None = None, bias: Any = None) -> Any:
        """``x kernel[start:stop] (+ bias)``: the product of ``x`` with the rows of a kernel
        that multiply it in a concatenated input (``[a; x; b] W = a W_a + x W_x + b W_b``),
        in the dtype of ``x``."""
        product = ops.matmul(x, ops.cast(kernel, x.dtype)[start:stop])
        return product if bias is None else ops.add(product, ops.cast(bias, x.dtype))

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
        """``(B, Tx*F) -> (B, Tx, F)``, with ``Tx`` read from the ``(B, Tx)`` mask state.

        ``B`` is read from ``x``, not left to the reshape: inside TensorFlow's graph a
        ``-1`` beside an unknown ``Tx`` loses a known ``B``, and the RNN's loop then
        refuses a state whose batch size changed (a batch of one sentence of a width
        not seen before)."""
        return ops.reshape(x, (ops.shape(x)[0], ops.shape(mask)[1], features))

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
