"""The MemDec decoder cell (Wang et al. 2016): RNNsearch plus a read/write buffer memory."""

from __future__ import annotations

import numbers
from typing import Any

import keras
from keras import ops

from keras_memnmt.layers import sublayers
from keras_memnmt.layers._checks import check_bool, check_choice, check_positive_int
from keras_memnmt.layers.base import DecoderCell, EncoderOutput
from keras_memnmt.layers.readout import clone_initializer

INIT_STATES = ("mean", "summary")
ADDRESS_NONLINEARITIES = ("tanh", "none")
INIT_NOISES = ("fixed", "sample")
ADDRESSINGS = ("shared_weights", "shared_parameters", "separate")


def resolve_addressing(addressing: str | None, shared_addressing: bool | None = None) -> str:
    """The addressing mode (see `MemDecCell`) from `addressing` and the legacy flag.

    `shared_addressing` is how models saved before the `addressing` argument
    existed name their mode: True is "shared_parameters", False "separate".
    Neither given: "shared_weights".
    """
    if shared_addressing is not None:
        legacy = "shared_parameters" if check_bool("shared_addressing", shared_addressing) else "separate"
        if addressing is not None and addressing != legacy:
            raise ValueError(
                f"Arguments `addressing={addressing!r}` and `shared_addressing={shared_addressing!r}` "
                f"disagree (shared_addressing={shared_addressing!r} means addressing={legacy!r}); "
                "give `addressing` only."
            )
        return legacy
    return check_choice("addressing", "shared_weights" if addressing is None else addressing, ADDRESSINGS)


def _check_optional_positive_int(name: str, value: object) -> int | None:
    return None if value is None else check_positive_int(name, value)


def _check_non_negative_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0.0:
        raise ValueError(f"Argument `{name}` must be a non-negative float. Received: {name}={value!r}")
    return float(value)


class _MemoryAddressing(keras.layers.Layer):
    """Content-based addressing of the `n` buffer-memory cells, MemDec Eq. 10-12.

        a(i)  = v^T tanh(W_a M(i) + U_a s)     ("tanh"; printed Eq. 12: no tanh)
        w~    = softmax_i a(i)                                          (Eq. 11)
        g     = sigmoid(w_g^T s + b_g)
        w     = g * w_prev + (1 - g) * w~                               (Eq. 10)

    Weights: `memory_kernel` `(m, A)` = `W_a^T`, `state_kernel` `(units, A)` =
    `U_a^T`, `score_vector` `(A,)` = `v`, `gate_kernel` `(units, 1)` = `w_g`,
    `gate_bias` `(1,)` = `b_g`. No bias inside the score (as in
    `AdditiveAttention`). Mixed precision: the softmax `w~` is computed in
    float32 and cast back to the compute dtype; the rest runs in the compute dtype.

    Call arguments: `state (B, units)`, `memory (B, n, m)`, `previous (B, n)`,
    optionally `projected_memory` = `project_memory(memory)` computed earlier.
    Returns `(weights (B, n), content_weights (B, n), gate (B, 1))`.
    """

    def __init__(
        self,
        units: int,
        nonlinearity: str = "tanh",
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.units = units
        self.nonlinearity = nonlinearity
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, state_shape: tuple, memory_shape: tuple) -> None:
        def kernel(name: str, shape: tuple) -> keras.Variable:
            return self.add_weight(name=name, shape=shape, initializer=clone_initializer(self.kernel_initializer))

        self.memory_kernel = kernel("memory_kernel", (memory_shape[-1], self.units))
        self.state_kernel = kernel("state_kernel", (state_shape[-1], self.units))
        self.score_vector = kernel("score_vector", (self.units,))
        self.gate_kernel = kernel("gate_kernel", (state_shape[-1], 1))
        self.gate_bias = self.add_weight(
            name="gate_bias", shape=(1,), initializer=clone_initializer(self.bias_initializer)
        )
        self.built = True

    def project_memory(self, memory: Any) -> Any:
        """`W_a M(i)` for every cell: `(B, n, m) -> (B, n, A)`.

        Split out so that a step addressing the same memory twice (the read of
        `M_{t-1}` and, with shared parameters, the write into it) projects it once.
        """
        # Called outside `__call__` (no autocast): cast by hand for mixed precision.
        return ops.matmul(memory, ops.cast(self.memory_kernel, memory.dtype))

    def call(self, state: Any, memory: Any, previous: Any, projected_memory: Any = None) -> tuple:
        if projected_memory is None:
            projected_memory = self.project_memory(memory)
        projected_state = ops.matmul(state, self.state_kernel)  # (B, A)
        hidden = projected_memory + ops.expand_dims(projected_state, 1)  # (B, n, A)
        if self.nonlinearity == "tanh":
            hidden = ops.tanh(hidden)
        scores = ops.sum(hidden * self.score_vector, axis=-1)  # (B, n)
        # The softmax in float32 (a no-op cast in float32), its weights in the compute dtype.
        content = ops.cast(ops.softmax(ops.cast(scores, "float32"), axis=-1), scores.dtype)  # (B, n)
        gate = ops.sigmoid(ops.matmul(state, self.gate_kernel) + self.gate_bias)  # (B, 1)
        return gate * previous + (1.0 - gate) * content, content, gate


@keras.saving.register_keras_serializable(package="keras_memnmt")
class MemDecCell(DecoderCell):
    """MemDec decoder step: RNNsearch with a read/write buffer memory `M^B`.

    Wang, Lu, Li & Liu 2016, Eq. 4-15. The decoder carries a vector state
    `s_t` (`units`) and a memory-state `M_t` of `n = memory_size` cells of
    `m = memory_dim` features. One step, given the embedding `e = e_{y_{t-1}}`
    of the previous target word (`input_side`, the products with `e` alone, and
    `_recurrent_step` are the only place these live; `_step` composes them):

        1. read     w^r_t = Address_r(s_{t-1}, M_{t-1}, w_{t-1})     (Eq. 10-12)
                    (addressing="shared_weights": w^r_t = w_{t-1} = w^w_{t-1})
                    r_{t-1} = sum_i w^r_t(i) M_{t-1}(i)              (Eq. 4, §3.1)
        2. pre-state  s~_t = tanh(W^r r_{t-1} + W^y e + b)            (Eq. 5)
                    (query_state=True: tanh(W^r r_{t-1} + W^s s_{t-1} + W^y e + b))
        3. context  c_t, alpha_t = AdditiveAttention(s~_t, h_1..h_Tx) (Eq. 6, 3)
        4. state    s_t = GRU(s_{t-1}, [e; c_t; r_{t-1}])            (Eq. 7: the printed
           GRU(r_{t-1}, y_{t-1}, c_t) read with s_{t-1} kept as the GRU's state and the
           read as an input, as the pre-training from RNNsearch needs; docs/decisions.md)
        5. write    w^w_t = Address_w(s_t, M_{t-1}, w^r_t)            (Eq. 8, §3.2)
                    erase mu^ers = sigmoid(W^ers s_t + b), add mu^add = sigmoid(W^add s_t + b)
                    M_t(i) = M_{t-1}(i) * (1 - w^w_t(i) mu^ers) + w^w_t(i) mu^add  (Eq. 13)
        6. output   o_t = [s_t; c_t; e]   (the input of the readout, Eq. 9)

    where `Address(s, M, w_prev)` is content addressing with an interpolation
    gate (see `_MemoryAddressing`):

        a(i) = v^T tanh(W_a M(i) + U_a s),  w~ = softmax_i a(i)       (Eq. 11-12)
        g = sigmoid(w_g^T s + b_g),         w = g w_prev + (1 - g) w~  (Eq. 10)

    and `readout(o)` is the deep output of Eq. 9 (`DeepOutput`, as in
    `RNNsearchCell`). The carried addressing weights `w_t` (`states[2]`) are
    `w^w_t`, except with `addressing="separate"`: `w^r_t` (see below).

    Initial states (`initial_states`), Eq. 14-15:

        s_0    = tanh(W_init mean_{j: mask_j=1} h_j + b)   (as `RNNsearchCell`)
        m      = tanh(W_ini sum_{j: mask_j=1} h_j + b_ini) / T_x,  T_x = true length
        M_0(i) = m + nu_i,   nu_i ~ N(0, init_noise_std^2 I)  (training only by default)
        w_0    = (1/n, ..., 1/n)

    Decisions (paper ambiguities, by equation):
    - Eq. 12 is printed without a nonlinearity: `v^T (W_a M(i) + U_a s)`. Then
      `v^T U_a s` is the same for every cell and cancels in the softmax, so the
      content weights ignore the state. Default `address_nonlinearity="tanh"`
      (the NTM / Bahdanau form, consistent with Eq. 3); `"none"` keeps the
      printed form. No bias inside the score.
    - Eq. 12 sizes: the paper has `W_a, U_a` in `R^{m x m}`, `v` in `R^m`; here
      the hidden size is `address_units` (default `attention_units`; pass
      `address_units=memory_dim` for the paper's shapes), and `U_a` maps the
      `units`-sized state.
    - Eq. 10 prints the gate as `g = sigma(w_g s_t)`, but the read happens
      before `s_t` exists (Eq. 4 reads with `s_{t-1}`): the read head uses
      `s_{t-1}` for both the content score and the gate, the write head uses
      `s_t` (Eq. 8). The gate has a bias; `w_g` is `(units, 1)` (the paper's
      `w_g in R^m` assumes `m = units`). Eq. 10 is followed as printed: `g`
      weights the *previous* weights, `1 - g` the new content weights (the
      other order is the same model with `w_g, b_g` negated).
    - Shared addressing (§3.2: "it is often beneficial to use the same weights
      for both reading (i.e., w^r_t) and writing (i.e., w^w_t) for the same
      vector-state s_t", the paper's best setting). "Weights" there are the
      weightings `w`, computed from `s_t`; read the other way they could be
      the addressing parameters. Three modes (`addressing`):
      * `"shared_weights"` (default): one addressing per step. The weighting
        computed from `s_t`, `w^w_t = Address(s_t, M_{t-1}, w^w_{t-1})`, is the
        write weighting at `t` and, carried as `w_t`, the read weighting at
        `t+1`: `w^r_{t+1} = w^w_t`, so `r_t = sum_i w^w_t(i) M_t(i)`. At `t = 1`
        the read uses `w_0`. This is the only mode in which the read and the
        write for the same `s_t` use literally the same weights; it also
        spends one addressing per step instead of two.
      * `"shared_parameters"` (`shared_addressing=True` in models saved before
        this argument existed): one set of parameters `{W_a, U_a, v, w_g, b_g}`,
        two addressings per step. The read at `t` is `w^r_t = Address(s_{t-1},
        M_{t-1}, w_{t-1})` and the write `w^w_t = Address(s_t, M_{t-1},
        w^r_t)`; the state carries `w^w_t`, so the read at `t+1` starts from
        the write weights computed from the same `s_t`.
      * `"separate"` (`shared_addressing=False`): as `"shared_parameters"`, but
        the write head has its own parameters; it interpolates with the
        current read weights `w^r_t` (Eq. 10 needs a "previous" weighting and
        no separate write state is carried), and the state carries `w^r_t`
        (Eq. 10 for the read head exactly).
    - Eq. 13 and the add equation: erase and add vectors are sigmoids (as
      printed) of `s_t`, each with a bias, `m`-dimensional.
    - Eq. 15: `sigma` is tanh (the paper says so); the division by `T_x` comes
      after the tanh, as printed. The sum runs over the unmasked source
      positions and `T_x` is the true (unpadded) length, so padding never
      changes `M_0`. `W_ini` maps `annotation_units -> m` and has a bias.
    - Eq. 14: `nu_i ~ N(0, 0.1)` is read as standard deviation 0.1
      (`init_noise_std`); reading 0.1 as the variance would be `std ~= 0.316`.
      `init_noise_std=0` disables it. Without the noise all cells of `M_0`
      are equal, so every content score, read and write weight is uniform
      and the cells stay equal at every step (the memory acts as one cell):
      the noise is what makes the cells distinguishable. The paper indexes
      `nu_i` by the cell alone and does not say when it is drawn, so both
      readings are offered (`init_noise`):
      * `"fixed"` (default): `nu` `(n, m)` is drawn once, when the cell is
        built, and kept as a non-trainable weight `memory_noise` (saved with
        the model). Training and decoding see the same `M_0`, decoding is
        deterministic, and the cells are distinct at inference too.
      * `"sample"`: a fresh `nu` per sentence, drawn only when
        `initial_states(..., training=True)` unless `noise_at_inference=True`.
        With `noise_at_inference=False` the cells are equal at inference
        (uniform addressing, see above), a mismatch with training; with
        `True` decoding is stochastic. A model must pass its `training`
        flag to `initial_states` for the training noise to be drawn.
    - `w_0` is uniform `1/n` (the paper does not say).
    - `m != units` is allowed (the paper uses `m = units = 1024`).
    - Mixed precision: the source attention and the content addressing softmaxes
      (Eq. 3, 11), the sums over the source (`s_0`, Eq. 15) and the memory update
      (Eq. 13) are computed in float32. `keras.layers.RNN` carries every state in
      the compute dtype, so `M_t` is rounded to it once per step, after the
      update; the rest runs in the compute dtype.
    - The GRU is Keras's GRUCell (`layers.gru.GRUCell`, `reset_after=True`, as in
      `RNNsearchCell`); Eq. 7's inputs are concatenated as `[e; c_t; r_{t-1}]`.
    - Dropout: in the readout (`output_dropout`, MemDec §4); the cell's
      `dropout` (variational, on the input embeddings, `DecoderCell.drop_inputs`)
      defaults to 0, and the models drop the target embeddings themselves.
    - Eq. 5 has no `s_{t-1}` term: the attention query of MemDec sees the
      state only through the memory read. Followed by default. Not in the
      paper, `query_state=True` adds `W^s s_{t-1}`, the term RNNsearch's
      feedback query has (§2.1), so that the query sees both. Our addition,
      for the RNNsearch warm start (§4.2): with it the warm-started model
      computes exactly the pre-trained RNNsearch until the read weights move
      (see `memdec_from_rnnsearch`); without it the copied attention loses
      the state it was trained on and the warm-started model starts far
      below RNNsearch (docs/results.md).

    Weights and the RNNsearch pre-training copy (MemDec §4.2). Sublayers share
    `RNNsearchCell`'s names wherever the parameter is the same:
    - `init_state` (Dense D -> units, tanh): identical to RNNsearch's.
    - `attention` (`AdditiveAttention`, query size `units`): identical.
    - `feedback_query` (Dense m+E -> units, tanh) is Eq. 5: kernel rows
      `[0:m]` = `W^r` (acting on `r_{t-1}`), rows `[m:m+E]` = `W^y`. RNNsearch's
      `feedback_query` has rows `[0:units]` for `s_{t-1}` and `[units:units+E]`
      for `e`: with `m == units` it copies 1:1 (`r` takes the place of `s`).
      With `query_state=True` the input is `[r; s; e]` (Dense m+units+E ->
      units): rows `[m:m+units+E]` have exactly the layout of RNNsearch's.
    - `gru` (GRUCell, input `E + D + m`): kernel rows `[0:E]` act on `e`,
      `[E:E+D]` on `c_t`, `[E+D:E+D+m]` on `r_{t-1}`. Rows `[0:E+D]` have
      exactly the layout of RNNsearch's GRU kernel (input `[e; c_t]`); the
      recurrent kernel and bias have the same shapes.
    - `deep_output` (`DeepOutput`): identical.
    - Memory-only (not pre-trained): `memory_init` (Dense D -> m, tanh),
      `read_addressing` (`memory_kernel`, `state_kernel`, `score_vector`,
      `gate_kernel`, `gate_bias`; with `"shared_weights"` it computes the one
      weighting of a step), `write_addressing` (same, only when
      `addressing="separate"` and `write=True`), `erase` and `add`
      (Dense units -> m, sigmoid; only when `write=True`), and the fixed
      Eq. 14 noise `memory_noise` `(n, m)` (non-trainable, `init_noise="fixed"`).

    States (all 2-D; the memory is flattened, cell-major):

        states = [s (B, units), memory (B, n*m), w (B, n), annotations (B, Tx*D),
                  keys (B, Tx*A), source_mask (B, Tx)]

    `state_size = [units, n*m, n, None, None, None]`; the last three are
    passed through unchanged (Keras 3 has no `constants=`). Build them with
    `initial_states(...)` and pass them as `initial_state=`.

    Args:
        units: int, size of the vector state `s_t`.
        target_vocab_size: int, number of output logits.
        attention_units: int, hidden size of the source attention.
        readout_units: int, size of the deep-output tanh layer.
        annotation_units: int, size `D` of an annotation `h_j`.
        memory_size: int, number of memory cells `n` (paper: 8).
        memory_dim: int or None, size `m` of a memory cell; None means `units`.
            The attribute holds the resolved value.
        address_units: int or None, hidden size `A` of the memory addressing;
            None means `attention_units`. The attribute holds the resolved value.
        address_nonlinearity: "tanh" or "none", see Eq. 12 above.
        addressing: "shared_weights" (default), "shared_parameters" or
            "separate": how reading and writing share the addressing (see
            above).
        shared_addressing: bool or None, the legacy name of `addressing`
            (True: "shared_parameters", False: "separate"); kept so that
            models saved with it load unchanged. Not in `get_config`.
        init_noise_std: float >= 0, standard deviation of `nu_i` (Eq. 14).
        init_noise: "fixed" (drawn once, used in training and decoding) or
            "sample" (a fresh draw per sentence), see Eq. 14 above.
        noise_at_inference: bool, with `init_noise="sample"`: also draw `nu_i`
            when `training=False`.
        write: bool; False disables the memory write (the memory stays `M_0`).
        query_state: bool; True adds `W^s s_{t-1}` to the pre-state of Eq. 5
            (not in the paper, see above). Default False.
        attention_remat: bool, `rematerialize` of the source attention (recompute its
            `(B, Tx, A)` tanh in the backward pass: less memory, same values).
        init_state: "mean" or "summary", how `s_0` is computed (as in
            `RNNsearchCell`).
        **kwargs: the `DecoderCell` arguments (`output_dropout`, `tied_output`,
            `dropout`, the three initializers, `seed`) and the base
            `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(B, E)`, the embedding of the previous target word.
        states: the 6 states above.
        training: bool, whether the readout dropout is active (unused in the
            step itself).

    Returns (`call`): `(output (B, units + D + E), new_states)`; (`step`): the
    same plus the source attention weights `(B, Tx)`; (`step_details`): a dict
    that also has the read / write weights, gate values and erase / add vectors
    (`_step` computes them all, and `step` drops what it does not return).

    Note: with a target mask in the enclosing `keras.layers.RNN`, use
    `zero_output_for_mask=True` (see `RNNsearchCell`).

    Example:

    ```python
    cell = MemDecCell(32, vocab, attention_units=32, readout_units=16,
                      annotation_units=2 * encoder_units, memory_size=8)
    decoder = keras.layers.RNN(cell, return_sequences=True)
    # inside a subclassed keras.Model.call:
    states = cell.initial_states(annotations, source_mask, training=training)
    # project_inputs: the products with the embeddings, for the whole sequence at once
    outputs = decoder(cell.project_inputs(target_embedded), initial_state=states)  # (B, T, F)
    logits = cell.readout(outputs, training=training)           # (B, T, V)
    ```
    """

    def __init__(
        self,
        units: int,
        target_vocab_size: int,
        attention_units: int,
        readout_units: int,
        annotation_units: int,
        memory_size: int = 8,
        memory_dim: int | None = None,
        address_units: int | None = None,
        address_nonlinearity: str = "tanh",
        addressing: str | None = None,
        shared_addressing: bool | None = None,
        init_noise_std: float = 0.1,
        init_noise: str = "fixed",
        noise_at_inference: bool = False,
        write: bool = True,
        query_state: bool = False,
        attention_remat: bool = True,
        init_state: str = "mean",
        **kwargs: Any,
    ) -> None:
        super().__init__(units, target_vocab_size, readout_units, annotation_units, **kwargs)
        self.attention_units = check_positive_int("attention_units", attention_units)
        self.memory_size = check_positive_int("memory_size", memory_size)
        memory_dim = _check_optional_positive_int("memory_dim", memory_dim)
        self.memory_dim = self.units if memory_dim is None else memory_dim
        address_units = _check_optional_positive_int("address_units", address_units)
        self.address_units = self.attention_units if address_units is None else address_units
        self.address_nonlinearity = check_choice("address_nonlinearity", address_nonlinearity, ADDRESS_NONLINEARITIES)
        self.addressing = resolve_addressing(addressing, shared_addressing)
        self.init_noise_std = _check_non_negative_float("init_noise_std", init_noise_std)
        self.init_noise = check_choice("init_noise", init_noise, INIT_NOISES)
        self.noise_at_inference = check_bool("noise_at_inference", noise_at_inference)
        self.write = check_bool("write", write)
        self.query_state = check_bool("query_state", query_state)
        self.attention_remat = check_bool("attention_remat", attention_remat)
        self.init_state = check_choice("init_state", init_state, INIT_STATES)

        def addressing(name: str) -> _MemoryAddressing:
            return _MemoryAddressing(
                self.address_units,
                nonlinearity=self.address_nonlinearity,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                bias_initializer=clone_initializer(self.bias_initializer),
                dtype=self.dtype_policy,
                name=name,
            )

        # Shared with RNNsearchCell (same names, see the class docstring).
        self.init_dense = sublayers.dense(self, self.units, "init_state")
        self.query_dense = sublayers.dense(self, self.units, "feedback_query")  # Eq. 5
        self.attention = sublayers.additive_attention(self)
        self.gru_cell = sublayers.gru_cell(self)
        self.deep_output = sublayers.deep_output(self, self.seed)
        # Memory-only parameters.
        self.memory_init_dense = sublayers.dense(self, self.memory_dim, "memory_init")  # Eq. 15
        self.read_addressing = addressing("read_addressing")
        separate_write = self.write and self.addressing == "separate"
        self.write_addressing = addressing("write_addressing") if separate_write else None
        self.erase_dense = sublayers.dense(self, self.memory_dim, "erase", "sigmoid") if self.write else None
        self.add_dense = sublayers.dense(self, self.memory_dim, "add", "sigmoid") if self.write else None
        self.memory_noise = None  # Eq. 14's fixed nu, created in build with init_noise="fixed"

    # ----------------------------------------------------------------- sizes
    @property
    def state_size(self) -> list:
        """`[units, n*m, n, None, None, None]`: `Tx` is only known per batch."""
        return [self.units, self.memory_size * self.memory_dim, self.memory_size, None, None, None]

    def compute_output_size(self, embedding_dim: int) -> int:
        """`units + annotation_units + E`."""
        return self.units + self.annotation_units + embedding_dim

    # ----------------------------------------------------------------- build
    def _build_memory_side(self) -> None:
        """Builds what `initial_states` needs; it does not depend on `E`."""
        if not self.attention.built:
            self.attention.build((None, self.units), (None, None, self.annotation_units))
        if not self.init_dense.built:
            self.init_dense.build((None, self.annotation_units))
        if not self.memory_init_dense.built:
            self.memory_init_dense.build((None, self.annotation_units))
        if self.init_noise == "fixed" and self.init_noise_std > 0.0 and self.memory_noise is None:
            self.memory_noise = self.add_weight(  # Eq. 14's nu, drawn once (see the docstring)
                name="memory_noise",
                shape=(self.memory_size, self.memory_dim),
                initializer=keras.initializers.RandomNormal(stddev=self.init_noise_std, seed=self.seed),
                trainable=False,
            )

    def build(self, input_shape: tuple) -> None:
        """Builds every weight from `input_shape = (B, E)`."""
        embedding_dim = self.set_embedding_dim(input_shape)
        self._build_memory_side()
        state_shape = (None, self.units)
        memory_shape = (None, self.memory_size, self.memory_dim)
        self.read_addressing.build(state_shape, memory_shape)
        query_inputs = self.memory_dim + (self.units if self.query_state else 0) + embedding_dim
        self.query_dense.build((None, query_inputs))
        self.gru_cell.build((None, embedding_dim + self.annotation_units + self.memory_dim))
        if self.write_addressing is not None:
            self.write_addressing.build(state_shape, memory_shape)
        if self.write:
            self.erase_dense.build(state_shape)
            self.add_dense.build(state_shape)
        self.deep_output.build((None, self.units + self.annotation_units + embedding_dim))
        self.built = True

    # --------------------------------------------------------------- states
    def initial_states_from(self, encoded: EncoderOutput, training: bool = False) -> list:
        """Builds the 6 decoder states from the encoder output (Eq. 14-15).

        Args:
            encoded: the annotations `h_j` `(B, Tx, D)`, their mask `(B, Tx)`, and
                the summary `(B, D)` (used only with `init_state="summary"`).
            training: bool; with `init_noise="sample"` the memory noise `nu_i`
                is drawn only when True (or always with `noise_at_inference=True`);
                the fixed noise is always added.

        Returns:
            `[s_0 (B, units), M_0 (B, n*m), w_0 (B, n), annotations (B, Tx*D),
            keys (B, Tx*A), source_mask (B, Tx)]`, with `keys = U_a h_j`
            computed here, once per sentence, and `w_0 = 1/n`.
        """
        annotations, source_mask, summary = encoded.annotations, encoded.mask, encoded.summary
        self._build_memory_side()
        dtype = self.compute_dtype
        annotations = ops.cast(annotations, dtype)
        mask = ops.cast(source_mask, dtype)  # (B, Tx)
        # The sums over the source positions in float32 (no-op casts in float32).
        mask32 = ops.cast(mask, "float32")
        total = ops.sum(ops.cast(annotations, "float32") * ops.expand_dims(mask32, -1), axis=1)  # (B, D)
        count = ops.maximum(ops.sum(mask32, axis=1, keepdims=True), 1.0)  # (B, 1), true T_x
        if self.init_state == "mean":
            pooled = ops.cast(total / count, dtype)
        else:
            if summary is None:
                raise ValueError("init_state='summary' needs `summary`. Received: summary=None")
            pooled = ops.cast(summary, dtype)
        s0 = self.init_dense(pooled)  # (B, units)

        # Eq. 15: m = tanh(W_ini sum_j h_j + b) / T_x; Eq. 14: M_0(i) = m + nu_i.
        cell_init = self.memory_init_dense(ops.cast(total, dtype)) / ops.cast(count, dtype)  # (B, m)
        memory = ops.expand_dims(cell_init, 1) * ops.ones((1, self.memory_size, 1), dtype)  # (B, n, m)
        if self.memory_noise is not None:
            memory = memory + ops.cast(ops.expand_dims(self.memory_noise, 0), dtype)
        elif self.init_noise_std > 0.0 and self.init_noise == "sample" and (training or self.noise_at_inference):
            noise = keras.random.normal(ops.shape(memory), stddev=self.init_noise_std, seed=self.seed_generator)
            memory = memory + ops.cast(noise, dtype)
        # w_0 = 1/n, (B, n). Not `ops.full`: on PyTorch it calls `.item()`, which fails on
        # the "meta" device where Keras first traces a model it builds for `fit`.
        weights = ops.ones_like(cell_init[:, :1]) * ops.ones((1, self.memory_size), dtype) / self.memory_size
        keys = ops.cast(self.attention.precompute_keys(annotations), dtype)  # (B, Tx, A)
        return [
            s0,
            self.flatten(memory),  # (B, n*m)
            weights,  # (B, n)
            self.flatten(annotations),  # (B, Tx*D)
            self.flatten(keys),  # (B, Tx*A)
            mask,
        ]

    # ----------------------------------------------------------------- step
    @property
    def projection_size(self) -> int:
        """`units` (Eq. 5's `W^y e + b`) + `3 units` (Eq. 7's GRU input kernel rows for `e`)."""
        return 4 * self.units

    def input_side(self, inputs: Any) -> Any:
        """What Eq. 5 and 7 compute from `e` alone: `[W^y e + b; W^gru_e e + b^gru]`,
        `(B, [T,] E)` to `(B, [T,] 4 units)` (the query's kernel reads `[r; (s;) e]`, the
        GRU's `[e; c_t; r_{t-1}]`)."""
        query_rows = self.memory_dim + (self.units if self.query_state else 0)
        gru = self.gru_cell
        return ops.concatenate(
            [
                self.rows_product(inputs, self.query_dense.kernel, query_rows, bias=self.query_dense.bias),
                self.rows_product(inputs, gru.kernel, 0, self._embedding_dim, bias=gru.bias[0]),
            ],
            axis=-1,
        )

    def loop_weights(self) -> dict:
        """Eq. 5's kernel rows for `[r; (s)]`, the GRU input kernel's for `[c_t; r_{t-1}]`."""
        query_rows = self.memory_dim + (self.units if self.query_state else 0)
        return {
            "query_rest": self.kernel_rows(self.query_dense.kernel, 0, query_rows),
            "gru_rest": self.kernel_rows(self.gru_cell.kernel, self._embedding_dim),
        }

    def _recurrent_step(self, inputs: Any, products: Any, states: list, training: bool = False) -> tuple:
        """One decoder step (the class docstring's equations) given `input_side(inputs)`:
        `(output, new_states, details)`.

        Args:
            inputs: `(B, E)` embedding of `y_{t-1}`.
            products: `(B, 4 units)`, `input_side(inputs)`.
            states: the 6 states `[s_{t-1}, M_{t-1}, w_{t-1}, annotations, keys,
                source_mask]`.
            training: bool (no dropout inside the step; kept for the contract).

        Returns:
            the output `(B, units + D + E)`, the 6 new states (the last 3
            unchanged) and a dict of the intermediate values: "attention"
            `(B, Tx)`, "read_weights" `w^r_t` `(B, n)`, "read_content_weights"
            `(B, n)` and "read_gate" `(B, 1)` (None with "shared_weights": the
            read computes no addressing), "read" `r_{t-1}` `(B, m)`, "query"
            `s~_t` `(B, units)`, and, when the write weights are computed
            (`write=True` or shared addressing), "write_weights" `w^w_t` `(B, n)`,
            "write_content_weights", "write_gate"; with `write=True` also "erase"
            and "add" `(B, m)`. Values absent are None.
        """
        del training  # dropout lives in the readout only
        s_prev, memory_flat, previous, annotations_flat, keys_flat, mask = states
        n, m = self.memory_size, self.memory_dim
        memory = ops.reshape(memory_flat, (-1, n, m))  # (B, n, m)
        annotations = self.unflatten(annotations_flat, mask, self.annotation_units)  # (B, Tx, D)
        keys = self.unflatten(keys_flat, mask, self.attention_units)  # (B, Tx, A)

        # 1. read M_{t-1} (Eq. 4, 10-12): with the weights carried from the
        # previous write ("shared_weights"), else addressed with s_{t-1}.
        projected = self.read_addressing.project_memory(memory)  # W_a M_{t-1}(i), (B, n, A)
        if self.addressing == "shared_weights":
            read_weights, read_content, read_gate = previous, None, None
        else:
            read_weights, read_content, read_gate = self.read_addressing(
                s_prev, memory, previous, projected_memory=projected
            )
        read = ops.sum(ops.expand_dims(read_weights, -1) * memory, axis=1)  # (B, m)
        # 2. pre-state s~_t = tanh(W^r r_{t-1} + W^y e + b) (Eq. 5), with query_state
        # plus W^s s_{t-1} (our addition, see the class docstring).
        # (`products` holds W^y e + b, computed by `input_side`.)
        query_inputs = ops.concatenate([read, s_prev], axis=-1) if self.query_state else read
        loop = self.step_weights()
        query = self.query_dense.activation(
            ops.matmul(query_inputs, loop["query_rest"]) + products[:, : self.units]
        )  # (B, units)
        # 3. c_t = read^S(s~_t, M^S) (Eq. 6, 3).
        context, attention = self.attention(query, keys, annotations, mask=mask)
        # 4. s_t = GRU(s_{t-1}, [e; c_t; r_{t-1}]) (Eq. 7); the `e` rows' product is in `products`.
        state = self.gru_cell.step_from_input_product(
            products[:, self.units :] + ops.matmul(ops.concatenate([context, read], axis=-1), loop["gru_rest"]), s_prev
        )
        # 5. write M_t = write(s_t, M_{t-1}) (Eq. 8, 13 and the add equation).
        write_addressing = self.write_addressing if self.addressing == "separate" else self.read_addressing
        write_weights = write_content = write_gate = erase = add = None
        if write_addressing is not None:
            # Shared parameters address the same M_{t-1}: reuse its projection.
            shared = projected if write_addressing is self.read_addressing else None
            write_weights, write_content, write_gate = write_addressing(
                state, memory, read_weights, projected_memory=shared
            )
        if self.write:
            erase = self.erase_dense(state)  # (B, m)
            add = self.add_dense(state)  # (B, m)
            # Computed in float32 and rounded once to the state's dtype (no-op casts in float32).
            w = ops.expand_dims(ops.cast(write_weights, "float32"), -1)  # (B, n, 1)
            updated = ops.cast(memory, "float32") * (
                1.0 - w * ops.expand_dims(ops.cast(erase, "float32"), 1)
            ) + w * ops.expand_dims(ops.cast(add, "float32"), 1)  # (B, n, m)
            memory_flat = ops.cast(ops.reshape(updated, (-1, n * m)), memory.dtype)  # (B, n*m)
        carried = read_weights if self.addressing == "separate" else write_weights
        # 6. o_t = [s_t; c_t; e], the input of the deep output (Eq. 9).
        output = ops.concatenate([state, context, inputs], axis=-1)
        return (
            output,
            [state, memory_flat, carried, annotations_flat, keys_flat, mask],
            {
                "attention": attention,
                "read_weights": read_weights,
                "read_content_weights": read_content,
                "read_gate": read_gate,
                "read": read,
                "query": query,
                "write_weights": write_weights,
                "write_content_weights": write_content,
                "write_gate": write_gate,
                "erase": erase,
                "add": add,
            },
        )

    def step_details(self, inputs: Any, states: list, training: bool = False) -> dict:
        """One decoder step with its intermediate values: "output", "states" and the
        details of `_step`, plus "erase_mean" and "add_mean" `(B,)`, the mean over the
        `m` features of the erase and add vectors, and "add_weights" `(B, n)`,
        `w^w_t(i) * add_mean`: the mean over the features of what Eq. 13 adds to cell
        `i` (`w^w_t(i) mu^add`), summing over the cells to "add_mean" (all three with
        `write=True`; else None)."""
        details = super().step_details(inputs, states, training=training)
        for name in ("erase", "add"):
            vector = details[name]
            details[f"{name}_mean"] = None if vector is None else ops.mean(vector, axis=-1)
        add_mean = details["add_mean"]
        details["add_weights"] = None if add_mean is None else details["write_weights"] * add_mean[:, None]
        return details

    # ---------------------------------------------------------------- config
    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "attention_units": self.attention_units,
            "memory_size": self.memory_size,
            "memory_dim": self.memory_dim,
            "address_units": self.address_units,
            "address_nonlinearity": self.address_nonlinearity,
            "addressing": self.addressing,
            "init_noise_std": self.init_noise_std,
            "init_noise": self.init_noise,
            "noise_at_inference": self.noise_at_inference,
            "write": self.write,
            "query_state": self.query_state,
            "attention_remat": self.attention_remat,
            "init_state": self.init_state,
        }
