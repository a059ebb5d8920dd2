"""The RMN decoder cell (Yum & Mu §2.4, after Tran, Bisazza & Monz 2016): an LSTM and a
memory block over the most recent target words, with the RMR variant."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers import sublayers
from keras_memnmt.layers._checks import check_bool, check_choice, check_positive_int
from keras_memnmt.layers.attention import masked_softmax
from keras_memnmt.layers.base import DecoderCell, EncoderOutput
from keras_memnmt.layers.readout import clone_initializer

CONTEXTS = ("attention", "fixed")
CONTEXT_ONCE = (None, "input", "output")


@keras.saving.register_keras_serializable(package="keras_memnmt")
class GatedMerge(keras.layers.Layer):
    """The gated recurrent function of Yum & Mu §2.2 (Eq. 4-7) that merges a memory read
    ``s`` into a state ``z`` (Tran et al.'s gated block)::

        u  = σ(s W_u + z U_u + b_u)          r = σ(s W_r + z U_r + b_r)
        h~ = tanh(s W_h + (r ⊙ z) U_h + b_h)
        h  = u ⊙ h~ + (1 - u) ⊙ z

    Why not ``keras.layers.GRUCell(reset_after=False)``, the same function: Keras slices
    its recurrent kernel into ``[U_u U_r]`` and ``U_h`` at every step, and on TensorFlow
    the gradient of each slice writes a zero-padded copy of the whole kernel; keeping the
    two parts as two weights made the RMN decoder's training step about 10% faster
    (decoder alone, B=64, 16 steps). Kernel columns ``[u | r | h]``.

    Args:
        units: int, size of ``z`` and ``h``.
        kernel_initializer, recurrent_initializer, bias_initializer: initializers of
            ``W``, ``U`` and ``b``.
        **kwargs: ``keras.layers.Layer`` arguments.

    Call arguments: ``s (B, d)``, ``z (B, units)``. Returns ``h (B, units)``.
    """

    def __init__(
        self,
        units: int,
        kernel_initializer: Any = "glorot_uniform",
        recurrent_initializer: Any = "orthogonal",
        bias_initializer: Any = "zeros",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.units = check_positive_int("units", units)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, input_shape: tuple) -> None:
        units = self.units
        self.kernel = self.add_weight(
            shape=(int(input_shape[-1]), 3 * units),
            name="kernel",
            initializer=clone_initializer(self.kernel_initializer),
        )
        self.gate_kernel = self.add_weight(
            shape=(units, 2 * units),
            name="gate_recurrent_kernel",
            initializer=clone_initializer(self.recurrent_initializer),
        )
        self.candidate_kernel = self.add_weight(
            shape=(units, units),
            name="candidate_recurrent_kernel",
            initializer=clone_initializer(self.recurrent_initializer),
        )
        self.bias = self.add_weight(
            shape=(3 * units,), name="bias", initializer=clone_initializer(self.bias_initializer)
        )
        self.built = True

    def call(self, s: Any, z: Any) -> Any:
        x_u, x_r, x_h = ops.split(ops.add(ops.matmul(s, self.kernel), self.bias), 3, axis=-1)
        z_u, z_r = ops.split(ops.matmul(z, self.gate_kernel), 2, axis=-1)
        update = ops.sigmoid(x_u + z_u)
        reset = ops.sigmoid(x_r + z_r)
        candidate = ops.tanh(x_h + ops.matmul(reset * z, self.candidate_kernel))
        return update * candidate + (1.0 - update) * z

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "units": self.units,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }


@keras.saving.register_keras_serializable(package="keras_memnmt")
class RMNCell(DecoderCell):
    """RMN decoder step: LSTM, memory block over the last ``n`` target words, gated merge.

    Yum & Mu §2.4, Eq. 8–12 and 16–19, after Tran, Bisazza & Monz 2016
    ("Recurrent Memory Networks for Language Modeling"). One step, given the
    embedding ``e = e_{y_{t-1}}`` of the previous target word:

        1. context  c_t: additive attention over the annotations, queried by
                    tanh(W [z_{t-1}; e] + b) (feedback) or z_{t-1}    (context="attention")
                    or the fixed c = tanh(V summary + b)   (context="fixed", Eq. 13)
        2. LSTM     z_t, k_t = LSTM([e; c_t], (z_{t-1}, k_{t-1}))     (Eq. 8-12, 14)
        3. memory   push y_{t-1}: the n most recent target words y_i, slot 0 the newest
                    M_i = M(y_i) + T_M[i],  C_i = C(y_i) + T_C[i]    (temporal rows T)
        4. read     P_t = softmax(M_i q_t) over the filled slots      (Eq. 16)
                    s_t = C_i^T P_t                                   (Eq. 17)
        5. merge    u = σ(W_u s_t + U_u z_t + b_u),  r = σ(W_r s_t + U_r z_t + b_r)
                    h_t = u ⊙ tanh(W s_t + U (r ⊙ z_t) + b) + (1 - u) ⊙ z_t    (§2.2, Eq. 4-7)
        6. RMR      h_t, g_t = LSTM_top(h_t, (h_{t-1}, g_{t-1}))   (top_lstm=True only)
        7. output   o_t = [h_t; c_t], read by the deep output       (§2.4, Eq. 19)

    ``input_side`` (the products with ``e`` alone) and ``_recurrent_step`` are the only
    place these equations live: ``_step`` composes them for ``step``, ``step_details`` and
    the greedy and beam searches, and ``call`` (``keras.layers.RNN``, teacher forcing) runs
    ``_recurrent_step`` on ``project_inputs`` (the input side of the whole sequence at once).

    Decisions where the printed text is unclear:

    - **Which context** (§2.4 joins "the encoder context c", Eq. 13-14): an argument.
      ``context="attention"`` (default) is RNNsearch's additive attention, so that RMN
      and RNNsearch differ only in the decoder; ``"fixed"`` is the report's own
      Cho-style context.
    - **Where the context is joined** (§2.4 joins it twice: before the LSTM and again
      before the softmax; §4.1.1 and §5.2 item 4 blame the −4.8 BLEU on that):
      ``context_once=None`` (default) joins it twice, as printed and as RNNsearch
      does (its GRU reads ``[e; c_t]`` and its deep output ``[s_t; c_t; e]``), so the
      comparison with RNNsearch stays on equal terms; ``"input"`` joins it before the
      LSTM only (``o_t = h_t``), ``"output"`` before the softmax only (the LSTM reads
      ``e`` alone).
    - **d against the LSTM size** (Eq. 16 multiplies the |V| x d rows M_i by z_t, so d
      must equal the LSTM size, while the text calls d "the embedding dimension"):
      ``memory_dim=None`` (default) makes d the LSTM size, Eq. 16 as printed and
      Tran et al.'s equal sizes; another ``memory_dim`` adds a learned query
      ``q_t = W_q z_t + b_q``. Otherwise ``q_t = z_t``.
    - **The gated function** (§2.2, "combined by gated recurrent function g"): GRU
      equations with ``s_t`` as the input and ``z_t`` as the previous state, both
      gates reading both (Tran et al.'s gated block), the reset gate before ``U``
      (Eq. 6): :class:`GatedMerge`. Biases added (Eq. 4-7 print none).
    - **Which words are in memory**: the inputs so far, newest first, including
      ``y_{t-1}`` (bos at the first step), as Tran et al.'s memory includes the current
      input. Slots not filled yet (positions before the start of the sentence) get
      exactly zero weight in Eq. 16.
    - **Temporal embeddings** (Tran et al.'s default, not in the report): one learned
      row per slot added to M_i and C_i; ``temporal_embeddings=False`` leaves them out.
    - **Output** (§2.4: "affine-transformed ... into another softmax"): the same deep
      output as RNNsearch (one tanh layer of ``readout_units``, dropout, logits; see
      ``DeepOutput``), for equal terms and for tied embeddings; it reads ``[h_t; c_t]``
      (no ``e``: the memory block has read ``y_{t-1}``).
    - **RMR** (§5.2 item 5, Tran et al.'s RMR): ``top_lstm=True`` runs a second LSTM
      of ``units`` on the memory block's output and outputs its state instead.
    - **Initial states**: ``z_0 = tanh(W_init mean_j h_j + b)`` (RNNsearch's
      ``init_state="mean"``) or, with the fixed context, ``tanh(W_init c + b)``
      (Cho); LSTM cells, the top LSTM and the memory start at zero.
    - The LSTMs are Keras's ``LSTMCell`` (gates i, f, c, o; forget-gate bias starts at 1).
    - Mixed precision: Eq. 16's softmax, the attention softmax and the mean over the
      source (``z_0``) are computed in float32; the rest, the states included, in the
      compute dtype.

    The memory in the state, and how the words reach it: ``M`` and ``C`` are this
    cell's two ``|V| x d`` embeddings. :meth:`prepare_inputs` looks the target words
    up in both, outside the loop (one lookup for the whole sentence, and one gradient
    scatter instead of one per step), and appends the rows to the input embedding:
    the step's input is ``[e; M(y_{t-1}); C(y_{t-1})]``. The state keeps the ``n``
    most recent words as those rows, with a 0/1 mask of the filled slots. Keeping the
    rows rather than the word ids is a decision: ``keras.layers.RNN`` casts every
    state to the compute dtype, and a bfloat16 state holds integers exactly only up
    to 256. The searches reorder these states with every other.

    States (all 2-D; ``n = memory_size``, ``d = memory_dim``)::

        [z (units), k (units), memory_keys (n*d), memory_values (n*d), memory_mask (n),
         (top_lstm:) h (units), g (units),
         (attention:) annotations (Tx*D), keys (Tx*A), source_mask (Tx)
         | (fixed:) context (units)]

    Args:
        units: int, LSTM size (and of the memory block's output).
        target_vocab_size: int, number of output logits (and rows of ``M``, ``C``).
        readout_units: int, size of the deep-output tanh layer.
        annotation_units: int, size ``D`` of an annotation (or of the summary).
        attention_units: int, hidden size of the additive attention (context="attention").
        memory_size: int, ``n``, the number of recent target words in memory (the
            report: 7; Tran et al.: 15).
        memory_dim: int or None, ``d``; None means ``units`` (see above).
        temporal_embeddings: bool, add one learned row per memory slot to M_i and C_i.
        context: "attention" (default) or "fixed".
        context_once: None (default, twice), "input" or "output" (see above).
        top_lstm: bool, the RMR variant.
        feedback_attention: bool, query the attention with ``tanh(W [z_{t-1}; e])``
            (MemDec §2.1, as RNNsearchCell) instead of ``z_{t-1}``.
        attention_remat: bool, recompute the attention's tanh in the backward pass.
        memory_initializer: initializer of ``M``, ``C`` and the temporal rows; default
            ``N(0, 1/d)``, so that Eq. 16's logits start at about unit scale.
        **kwargs: the ``DecoderCell`` arguments (``output_dropout``, ``tied_output``,
            ``dropout``, the three initializers, ``seed``) and ``keras.layers.Layer``'s.

    Call arguments:
        inputs: ``(B, E + 2d)``, :meth:`prepare_inputs` of the previous target word.
        states: the states above.
        training: bool, whether dropout is active.

    Returns (``call``): ``(output (B, units [+ context size]), new_states)``; (``step``):
    the same plus the source attention ``(B, Tx)`` (None with the fixed context).
    ``step_details`` (and :meth:`memory_attention`) return ``P_t`` of a step as
    "memory_attention".
    """

    def __init__(
        self,
        units: int,
        target_vocab_size: int,
        readout_units: int,
        annotation_units: int,
        attention_units: int = 512,
        memory_size: int = 7,
        memory_dim: int | None = None,
        temporal_embeddings: bool = True,
        context: str = "attention",
        context_once: str | None = None,
        top_lstm: bool = False,
        feedback_attention: bool = True,
        attention_remat: bool = True,
        memory_initializer: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(units, target_vocab_size, readout_units, annotation_units, **kwargs)
        self.attention_units = check_positive_int("attention_units", attention_units)
        self.memory_size = check_positive_int("memory_size", memory_size)
        self.memory_dim = self.units if memory_dim is None else check_positive_int("memory_dim", memory_dim)
        self.temporal_embeddings = check_bool("temporal_embeddings", temporal_embeddings)
        self.context = check_choice("context", context, CONTEXTS)
        if context_once not in CONTEXT_ONCE:
            raise ValueError(f"`context_once` must be one of {CONTEXT_ONCE}; received: {context_once!r}")
        self.context_once = context_once
        self.top_lstm = check_bool("top_lstm", top_lstm)
        self.feedback_attention = check_bool("feedback_attention", feedback_attention)
        self.attention_remat = check_bool("attention_remat", attention_remat)
        self.memory_initializer = keras.initializers.get(
            memory_initializer or keras.initializers.RandomNormal(stddev=self.memory_dim**-0.5)
        )

        attending = self.context == "attention"
        self.init_dense = sublayers.dense(self, self.units, "init_state")
        self.context_dense = None if attending else sublayers.dense(self, self.units, "context")
        self.attention = sublayers.additive_attention(self) if attending else None
        self.query_dense = (
            sublayers.dense(self, self.units, "feedback_query") if attending and feedback_attention else None
        )
        self.lstm = sublayers.lstm_cell(self, "lstm")
        self.top = sublayers.lstm_cell(self, "top_lstm") if top_lstm else None
        self.memory_query = (
            None
            if self.memory_dim == self.units
            else sublayers.dense(self, self.memory_dim, "memory_query", activation=None)
        )
        self.key_embedding = self._memory_embedding("memory_key_embedding")
        self.value_embedding = self._memory_embedding("memory_value_embedding")
        self.gate = GatedMerge(
            self.units,
            kernel_initializer=self.kernel_initializer,
            recurrent_initializer=self.recurrent_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="memory_gate",
        )
        self.deep_output = sublayers.deep_output(self, self.seed)

    def _memory_embedding(self, name: str) -> keras.layers.Embedding:
        return keras.layers.Embedding(
            self.target_vocab_size,
            self.memory_dim,
            embeddings_initializer=clone_initializer(self.memory_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    # ----------------------------------------------------------------- sizes
    @property
    def context_units(self) -> int:
        """Size of ``c_t``: ``annotation_units`` (attention) or ``units`` (fixed)."""
        return self.annotation_units if self.context == "attention" else self.units

    @property
    def state_size(self) -> list:
        n, d = self.memory_size, self.memory_dim
        sizes = [self.units, self.units, n * d, n * d, n]
        if self.top_lstm:
            sizes += [self.units, self.units]
        if self.context == "attention":
            return sizes + [None, None, None]  # Tx is only known per batch
        return sizes + [self.units]

    def compute_output_size(self, embedding_dim: int) -> int:
        """``units`` plus the context's size unless ``context_once="input"``."""
        return self.units + (0 if self.context_once == "input" else self.context_units)

    # ----------------------------------------------------------------- build
    def _build_memory_side(self) -> None:
        """Builds what ``initial_states`` and ``prepare_inputs`` need; independent of ``E``."""
        if self.attention is not None and not self.attention.built:
            self.attention.build((None, self.units), (None, None, self.annotation_units))
        if self.context_dense is not None and not self.context_dense.built:
            self.context_dense.build((None, self.annotation_units))
        if not self.init_dense.built:
            self.init_dense.build((None, self.context_units if self.context == "fixed" else self.annotation_units))
        for embedding in (self.key_embedding, self.value_embedding):
            if not embedding.built:
                embedding.build((None,))
        if self.temporal_embeddings and not hasattr(self, "temporal_keys"):
            shape = (self.memory_size, self.memory_dim)
            self.temporal_keys = self.add_weight(
                shape=shape, name="temporal_keys", initializer=clone_initializer(self.memory_initializer)
            )
            self.temporal_values = self.add_weight(
                shape=shape, name="temporal_values", initializer=clone_initializer(self.memory_initializer)
            )

    def build(self, input_shape: tuple) -> None:
        """Builds every weight from ``input_shape = (B, E + 2d)`` (see :meth:`prepare_inputs`)."""
        embedding_dim = self.set_embedding_dim((None, int(input_shape[-1]) - 2 * self.memory_dim))
        self._step_input_dim = int(input_shape[-1])  # [e; M(y); C(y)]
        if embedding_dim < 1:
            raise ValueError(
                f"RMNCell's input is [e; M(y); C(y)] ({2 * self.memory_dim} + E features), "
                f"got {input_shape[-1]}: pass the inputs through prepare_inputs()"
            )
        self._build_memory_side()
        if self.query_dense is not None:
            self.query_dense.build((None, self.units + embedding_dim))
        joined = 0 if self.context_once == "output" else self.context_units
        self.lstm.build((None, embedding_dim + joined))
        if self.top is not None:
            self.top.build((None, self.units))
        if self.memory_query is not None:
            self.memory_query.build((None, self.units))
        self.gate.build((None, self.memory_dim))
        self.deep_output.build((None, self.compute_output_size(embedding_dim)))
        self.built = True

    # ----------------------------------------------------------------- inputs and states
    def prepare_inputs(self, embedded: Any, tokens: Any) -> Any:
        """``[e; M(y); C(y)]``: the step's inputs, ``(B, [T,] E + 2d)``, from the target
        embeddings ``(B, [T,] E)`` and their ids ``(B, [T])``."""
        self._build_memory_side()
        embedded = ops.cast(embedded, self.compute_dtype)
        return ops.concatenate([embedded, self.key_embedding(tokens), self.value_embedding(tokens)], axis=-1)

    def initial_states_from(self, encoded: EncoderOutput, training: bool = False) -> list:
        """The states of the class docstring; the memory and the LSTM cells start empty."""
        self._build_memory_side()
        dtype = self.compute_dtype
        if self.context == "fixed":
            if encoded.summary is None:
                raise ValueError("RMNCell with context='fixed' needs the encoder's `summary`. Received: summary=None")
            context = self.context_dense(ops.cast(encoded.summary, dtype))  # (B, units)
            pooled, source = context, [context]
        else:
            annotations = ops.cast(encoded.annotations, dtype)
            mask = ops.cast(encoded.mask, dtype)
            pooled = self.masked_mean(annotations, mask)  # (B, D)
            keys = ops.cast(self.attention.precompute_keys(annotations), dtype)  # (B, Tx, A)
            source = [self.flatten(annotations), self.flatten(keys), mask]
        z0 = self.init_dense(pooled)  # (B, units)
        zeros = ops.zeros_like(z0)
        n, d = self.memory_size, self.memory_dim
        batch = ops.shape(z0)[0]
        memory = [ops.zeros((batch, n * d), dtype), ops.zeros((batch, n * d), dtype), ops.zeros((batch, n), dtype)]
        top = [zeros, zeros] if self.top_lstm else []
        return [z0, zeros, *memory, *top, *source]

    # ----------------------------------------------------------------- step
    def memory_attention(self, inputs: Any, states: list) -> Any:
        """``P_t`` (Eq. 16) of the step from ``states`` on ``inputs``: ``(B, n)``, slot 0 = ``y_{t-1}``
        (``step_details(...)["memory_attention"]``)."""
        return self._step(inputs, states, training=False)[2]["memory_attention"]

    @property
    def projection_size(self) -> int:
        """``units`` (the feedback query's rows for ``e``, with attention and a feedback
        query) + ``4 units`` (the LSTM input kernel's rows for ``e``)."""
        return (self.units if self.query_dense is not None else 0) + 4 * self.units

    def input_side(self, inputs: Any) -> Any:
        """What steps 1 and 2 compute from ``e`` alone: ``[W_e e + b; W^lstm_e e + b^lstm]``
        (the query's kernel reads ``[z_{t-1}; e]``, the LSTM's ``[e; c_t]`` or ``e``), from
        ``(B, [T,] E + 2d)`` step inputs to ``(B, [T,] projection_size)``."""
        embedding_dim = self._embedding_dim
        e = inputs[..., :embedding_dim]
        parts = (
            []
            if self.query_dense is None
            else [self.rows_product(e, self.query_dense.kernel, self.units, bias=self.query_dense.bias)]
        )
        parts.append(self.rows_product(e, self.lstm.kernel, 0, embedding_dim, bias=self.lstm.bias))
        return parts[0] if len(parts) == 1 else ops.concatenate(parts, axis=-1)

    def loop_weights(self) -> dict:
        """The feedback query kernel's rows for ``z_{t-1}``, the LSTM input kernel's for ``c_t``."""
        weights = {}
        if self.query_dense is not None:
            weights["query_state"] = self.kernel_rows(self.query_dense.kernel, 0, self.units)
        if self.context_once != "output":
            weights["lstm_context"] = self.kernel_rows(self.lstm.kernel, self._embedding_dim)
        return weights

    def _recurrent_step(self, inputs: Any, products: Any, states: list, training: bool = False) -> tuple:
        """One decoder step (the equations of the class docstring) given ``products =
        input_side(inputs)``.

        Args:
            inputs: ``(B, E + 2d)``, :meth:`prepare_inputs` of ``y_{t-1}``.
            products: ``(B, projection_size)``, ``input_side(inputs)``.
            states: the states of the class docstring.
            training: bool, whether dropout is active.

        Returns:
            ``(output, new_states, details)``: details "memory_attention" ``P_t``
            ``(B, n)`` and, with ``context="attention"``, "attention" ``(B, Tx)``.
        """
        n, d = self.memory_size, self.memory_dim
        z_prev, k_prev, keys_flat, values_flat, filled = states[:5]
        rest = states[5:]
        top_states, rest = (rest[:2], rest[2:]) if self.top_lstm else ([], rest)
        # Slices, not ops.split: with split points, PyTorch's split reads them back from a
        # tensor (`.tolist()`), which fails on the "meta" device Keras builds models on.
        embedding_dim = int(inputs.shape[-1]) - 2 * d
        key_new, value_new = inputs[:, embedding_dim : embedding_dim + d], inputs[:, embedding_dim + d :]

        # 1. the source context c_t
        if self.context == "attention":
            annotations_flat, source_keys_flat, source_mask = rest
            annotations = self.unflatten(annotations_flat, source_mask, self.annotation_units)
            source_keys = self.unflatten(source_keys_flat, source_mask, self.attention_units)
            query = (
                z_prev
                if self.query_dense is None
                else self.query_dense.activation(
                    ops.matmul(z_prev, self.step_weights()["query_state"]) + products[:, : self.units]
                )
            )  # W [z_{t-1}; e] + b, e's rows in `products`
            context, attention = self.attention(query, source_keys, annotations, mask=source_mask)
        else:
            (context,), attention = rest, None
        # 2. the LSTM (Eq. 8-12), its input [e; c_t] (Eq. 14) or e alone
        lstm_product = products[:, -4 * self.units :]  # e's rows, with the bias
        if self.context_once != "output":  # + c_t's rows
            lstm_product = lstm_product + ops.matmul(context, self.step_weights()["lstm_context"])
        z, (_, k) = self.lstm.step_from_input_product(lstm_product, [z_prev, k_prev])
        # 3. push y_{t-1} into slot 0; the oldest word leaves
        keys_flat = self.push_window(keys_flat, key_new)
        values_flat = self.push_window(values_flat, value_new)
        filled = self.push_window(filled, ops.ones_like(filled[:, :1]))
        memory_keys = ops.reshape(keys_flat, (-1, n, d))  # (B, n, d)
        memory_values = ops.reshape(values_flat, (-1, n, d))
        if self.temporal_embeddings:
            memory_keys = memory_keys + ops.cast(self.temporal_keys, memory_keys.dtype)
            memory_values = memory_values + ops.cast(self.temporal_values, memory_values.dtype)
        # 4. P_t = softmax(M_i q_t) over the filled slots (Eq. 16); s_t = C_i^T P_t (Eq. 17)
        query = z if self.memory_query is None else self.memory_query(z)  # (B, d)
        scores = ops.squeeze(ops.matmul(memory_keys, ops.expand_dims(query, -1)), -1)  # (B, n)
        weights = masked_softmax(scores, filled)  # exactly 0 on empty slots
        read = ops.squeeze(ops.matmul(ops.expand_dims(weights, 1), memory_values), 1)  # (B, d)
        # 5. the gated merge of s_t and z_t (§2.2)
        h = self.gate(read, z)
        # 6. RMR: a second LSTM on the block's output
        if self.top_lstm:
            h, top_states = self.top(h, list(top_states), training=training)
            top_states = list(top_states)
        # 7. o_t = [h_t; c_t] (or h_t)
        output = h if self.context_once == "input" else ops.concatenate([h, context], axis=-1)
        new_states = [z, k, keys_flat, values_flat, filled, *top_states, *rest]
        details = {"memory_attention": weights}
        if attention is not None:
            details["attention"] = attention
        return output, new_states, details

    # ---------------------------------------------------------------- config
    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "attention_units": self.attention_units,
            "memory_size": self.memory_size,
            "memory_dim": self.memory_dim,
            "temporal_embeddings": self.temporal_embeddings,
            "context": self.context,
            "context_once": self.context_once,
            "top_lstm": self.top_lstm,
            "feedback_attention": self.feedback_attention,
            "attention_remat": self.attention_remat,
            "memory_initializer": keras.initializers.serialize(self.memory_initializer),
        }
