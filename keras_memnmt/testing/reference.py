"""NumPy reference implementations of the layers' equations, for tests.

Written from the papers' equations, not by calling the layers: each function
takes the layer's weights as NumPy arrays (Keras' row-vector convention,
`y = x @ kernel + bias`) and computes one step in float64 with explicit loops
over source positions where the paper sums. Compare a layer against these to
about 1e-5.

Papers: Wang et al. 2016 (MemDec), Yum & Mu (the Cho et al. encoder-decoder and
the RMN), Salton et al. 2017 (Luong scores, the Attentive NMT decoder), Bahdanau
et al. 2014 (RNNsearch).
"""

from __future__ import annotations

import numpy as np


def _f64(*arrays: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(a, dtype=np.float64) for a in arrays]


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def dense(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """`x @ kernel + bias` (the affine map of a `keras.layers.Dense`)."""
    x, kernel = _f64(x, kernel)
    y = x @ kernel
    return y if bias is None else y + np.asarray(bias, np.float64)


def masked_softmax(scores: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Softmax over the last axis restricted to `mask != 0` (masked -> exactly 0).

    Args:
        scores: `(B, Tx)`.
        mask: `(B, Tx)` or None.
    """
    scores = np.asarray(scores, np.float64)
    keep = np.ones_like(scores, bool) if mask is None else np.asarray(mask) != 0
    weights = np.zeros_like(scores)
    for b in range(scores.shape[0]):
        if keep[b].any():
            e = np.exp(scores[b, keep[b]] - scores[b, keep[b]].max())
            weights[b, keep[b]] = e / e.sum()
    return weights


def _context(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Eq. 3 (Wang et al. 2016): c = sum_j alpha_j h_j, `(B, Tx), (B, Tx, D) -> (B, D)`."""
    (values,) = _f64(values)
    context = np.zeros((values.shape[0], values.shape[2]))
    for j in range(values.shape[1]):
        context += weights[:, j : j + 1] * values[:, j]
    return context


def additive_attention(
    query: np.ndarray,
    annotations: np.ndarray,
    mask: np.ndarray | None,
    query_kernel: np.ndarray,
    key_kernel: np.ndarray,
    score_vector: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Bahdanau: e_j = v_a^T tanh(W_a q + U_a h_j) (Wang et al. 2016, after Eq. 3).

    Args:
        query: `(B, Q)`; annotations: `(B, Tx, D)`; mask: `(B, Tx)` or None.
        query_kernel: `(Q, A)` = W_a^T; key_kernel: `(D, A)` = U_a^T;
        score_vector: `(A,)` = v_a.

    Returns:
        `(context (B, D), weights (B, Tx))`.
    """
    query, annotations, w_a, u_a, v_a = _f64(query, annotations, query_kernel, key_kernel, score_vector)
    batch, source_len, _ = annotations.shape
    scores = np.zeros((batch, source_len))
    for j in range(source_len):
        scores[:, j] = np.tanh(query @ w_a + annotations[:, j] @ u_a) @ v_a
    weights = masked_softmax(scores, mask)
    return _context(weights, annotations), weights


def luong_attention(
    query: np.ndarray,
    annotations: np.ndarray,
    mask: np.ndarray | None,
    score: str,
    kernel: np.ndarray | None = None,
    score_vector: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Luong scores (Salton et al. 2017, Eq. 7-9, read as in Luong et al. 2015).

    dot: q . h_j; general: q^T W_a h_j with `kernel` `(Q, D)` = W_a;
    concat: v_a^T tanh(W_a [q; h_j]) with `kernel` `(Q + D, A)` = W_a^T and
    `score_vector` `(A,)` = v_a.

    Returns:
        `(context (B, D), weights (B, Tx))`.
    """
    query, annotations = _f64(query, annotations)
    batch, source_len, _ = annotations.shape
    scores = np.zeros((batch, source_len))
    for b in range(batch):
        for j in range(source_len):
            q, h = query[b], annotations[b, j]
            if score == "dot":
                scores[b, j] = q @ h
            elif score == "general":
                scores[b, j] = q @ np.asarray(kernel, np.float64) @ h
            elif score == "concat":
                hidden = np.tanh(np.concatenate([q, h]) @ np.asarray(kernel, np.float64))
                scores[b, j] = hidden @ np.asarray(score_vector, np.float64)
            else:
                raise ValueError(f"unknown score {score!r}")
    weights = masked_softmax(scores, mask)
    return _context(weights, annotations), weights


def gru_step(
    x: np.ndarray,
    h_prev: np.ndarray,
    kernel: np.ndarray,
    recurrent_kernel: np.ndarray,
    bias: np.ndarray | None,
) -> np.ndarray:
    """One step of `keras.layers.GRUCell` with `reset_after=True` (its default).

    Kernel columns are ordered `[z | r | h]`; `bias` is `(2, 3*units)`: row 0
    for the input projection, row 1 for the recurrent one.

        z  = sigmoid(x W_z + b_z + h U_z + b'_z)
        r  = sigmoid(x W_r + b_r + h U_r + b'_r)
        hh = tanh(x W_h + b_h + r * (h U_h + b'_h))
        h_t = z * h + (1 - z) * hh

    Args:
        x: `(B, I)`; h_prev: `(B, U)`; kernel: `(I, 3U)`;
        recurrent_kernel: `(U, 3U)`; bias: `(2, 3U)` or None.
    """
    x, h, kernel, recurrent_kernel = _f64(x, h_prev, kernel, recurrent_kernel)
    units = h.shape[-1]
    bias = np.zeros((2, 3 * units)) if bias is None else np.asarray(bias, np.float64)

    def part(i: int) -> slice:
        return slice(i * units, (i + 1) * units)

    z = sigmoid(x @ kernel[:, part(0)] + bias[0, part(0)] + h @ recurrent_kernel[:, part(0)] + bias[1, part(0)])
    r = sigmoid(x @ kernel[:, part(1)] + bias[0, part(1)] + h @ recurrent_kernel[:, part(1)] + bias[1, part(1)])
    hh = np.tanh(x @ kernel[:, part(2)] + bias[0, part(2)] + r * (h @ recurrent_kernel[:, part(2)] + bias[1, part(2)]))
    return z * h + (1.0 - z) * hh


def readout(
    outputs: np.ndarray,
    hidden_kernel: np.ndarray,
    hidden_bias: np.ndarray,
    logits_kernel: np.ndarray,
    logits_bias: np.ndarray,
) -> np.ndarray:
    """Deep output, MemDec Eq. 9 (no dropout: inference).

    logits = tanh([s_t; c_t; e] W_o + b_o) W_y + b_y, on `(..., F)`.
    """
    return dense(np.tanh(dense(outputs, hidden_kernel, hidden_bias)), logits_kernel, logits_bias)


def rnnsearch_initial_state(
    annotations: np.ndarray, mask: np.ndarray, init_kernel: np.ndarray, init_bias: np.ndarray
) -> np.ndarray:
    """s_0 = tanh(W_init mean_{j: mask_j = 1} h_j + b): `(B, Tx, D) -> (B, units)`."""
    annotations, mask = _f64(annotations, mask)
    pooled = np.stack([annotations[b][mask[b] != 0].mean(axis=0) for b in range(annotations.shape[0])])
    return np.tanh(dense(pooled, init_kernel, init_bias))


def rnnsearch_step(
    embedded: np.ndarray,
    s_prev: np.ndarray,
    annotations: np.ndarray,
    mask: np.ndarray,
    *,
    feedback_attention: bool,
    attention_query_kernel: np.ndarray,
    attention_key_kernel: np.ndarray,
    attention_score_vector: np.ndarray,
    gru_kernel: np.ndarray,
    gru_recurrent_kernel: np.ndarray,
    gru_bias: np.ndarray,
    feedback_kernel: np.ndarray | None = None,
    feedback_bias: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One RNNsearch decoder step (Wang et al. 2016, Eq. 2-3 and §2.1).

        q   = tanh(W [s_{t-1}; e] + b)   if feedback_attention, else s_{t-1}
        c_t = sum_j alpha_j h_j,  alpha = softmax(v_a^T tanh(W_a q + U_a h_j))
        s_t = GRU(s_{t-1}, [e; c_t])
        o_t = [s_t; c_t; e]

    Returns:
        `(o_t (B, U + D + E), s_t (B, U), alpha (B, Tx))`.
    """
    embedded, s_prev = _f64(embedded, s_prev)
    if feedback_attention:
        query = np.tanh(dense(np.concatenate([s_prev, embedded], -1), feedback_kernel, feedback_bias))
    else:
        query = s_prev
    context, weights = additive_attention(
        query,
        annotations,
        mask,
        attention_query_kernel,
        attention_key_kernel,
        attention_score_vector,
    )
    state = gru_step(np.concatenate([embedded, context], -1), s_prev, gru_kernel, gru_recurrent_kernel, gru_bias)
    return np.concatenate([state, context, embedded], -1), state, weights


def cho_initial_states(
    summary: np.ndarray,
    context_kernel: np.ndarray,
    context_bias: np.ndarray,
    init_kernel: np.ndarray,
    init_bias: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """c = tanh(V summary + b_V) (Eq. 13), s_0 = tanh(W_init c + b): returns `(s_0, c)`."""
    context = np.tanh(dense(summary, context_kernel, context_bias))
    return np.tanh(dense(context, init_kernel, init_bias)), context


def cho_step(
    embedded: np.ndarray,
    s_prev: np.ndarray,
    context: np.ndarray,
    gru_kernel: np.ndarray,
    gru_recurrent_kernel: np.ndarray,
    gru_bias: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """One Cho decoder step: s_t = GRU(s_{t-1}, [e; c]) (Eq. 14), o_t = [s_t; c; e].

    Returns:
        `(o_t (B, 2U + E), s_t (B, U))`.
    """
    embedded, s_prev, context = _f64(embedded, s_prev, context)
    state = gru_step(np.concatenate([embedded, context], -1), s_prev, gru_kernel, gru_recurrent_kernel, gru_bias)
    return np.concatenate([state, context, embedded], -1), state


def memdec_initial_states(
    annotations: np.ndarray,
    mask: np.ndarray,
    init_kernel: np.ndarray,
    init_bias: np.ndarray,
    memory_init_kernel: np.ndarray,
    memory_init_bias: np.ndarray,
    memory_size: int,
    noise: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MemDec initial states (Wang et al. 2016, Eq. 14-15), over the unmasked positions only.

        s_0    = tanh(W_init mean_j h_j + b)                  (as RNNsearch)
        m      = tanh(W_ini sum_j h_j + b_ini) / T_x,  T_x = number of real tokens
        M_0(i) = m + nu_i                                      (nu = `noise` or 0)
        w_0    = 1/n

    Args:
        annotations: `(B, Tx, D)`; mask: `(B, Tx)`; init_kernel `(D, U)`;
        memory_init_kernel `(D, m)`; noise: optional `(B, n, m)`.

    Returns:
        `(s_0 (B, U), M_0 (B, n, m), w_0 (B, n))`.
    """
    annotations, mask = _f64(annotations, mask)
    s0 = rnnsearch_initial_state(annotations, mask, init_kernel, init_bias)
    batch = annotations.shape[0]
    memory = []
    for b in range(batch):
        real = annotations[b][mask[b] != 0]  # (T_x, D)
        total = np.zeros(annotations.shape[2])
        for h in real:
            total += h
        cell = np.tanh(dense(total, memory_init_kernel, memory_init_bias)) / len(real)
        memory.append(np.stack([cell] * memory_size))
    memory = np.stack(memory)
    if noise is not None:
        memory = memory + np.asarray(noise, np.float64)
    return s0, memory, np.full((batch, memory_size), 1.0 / memory_size)


def memory_addressing(
    state: np.ndarray,
    memory: np.ndarray,
    previous: np.ndarray,
    memory_kernel: np.ndarray,
    state_kernel: np.ndarray,
    score_vector: np.ndarray,
    gate_kernel: np.ndarray,
    gate_bias: np.ndarray,
    nonlinearity: str = "tanh",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MemDec content addressing with an interpolation gate (Wang et al. 2016, Eq. 10-12).

        a(i) = v^T tanh(W_a M(i) + U_a s)   (nonlinearity "tanh"; "none": no tanh)
        w~   = softmax_i a(i)
        g    = sigmoid(w_g^T s + b_g)
        w    = g w_prev + (1 - g) w~

    Args:
        state: `(B, U)`; memory: `(B, n, m)`; previous: `(B, n)`;
        memory_kernel `(m, A)` = W_a^T; state_kernel `(U, A)` = U_a^T;
        score_vector `(A,)`; gate_kernel `(U, 1)`; gate_bias `(1,)`.

    Returns:
        `(w (B, n), w~ (B, n), g (B, 1))`.
    """
    state, memory, previous, w_a, u_a, v = _f64(state, memory, previous, memory_kernel, state_kernel, score_vector)
    batch, n, _ = memory.shape
    scores = np.zeros((batch, n))
    for i in range(n):
        hidden = memory[:, i] @ w_a + state @ u_a
        if nonlinearity == "tanh":
            hidden = np.tanh(hidden)
        elif nonlinearity != "none":
            raise ValueError(f"unknown nonlinearity {nonlinearity!r}")
        scores[:, i] = hidden @ v
    content = masked_softmax(scores, None)
    gate = sigmoid(dense(state, gate_kernel, gate_bias))  # (B, 1)
    return gate * previous + (1.0 - gate) * content, content, gate


def memdec_step(
    embedded: np.ndarray,
    s_prev: np.ndarray,
    memory: np.ndarray,
    previous_weights: np.ndarray,
    annotations: np.ndarray,
    mask: np.ndarray,
    *,
    address_nonlinearity: str,
    addressing: str,
    write: bool,
    read_addressing: dict,
    query_kernel: np.ndarray,
    query_bias: np.ndarray,
    attention_query_kernel: np.ndarray,
    attention_key_kernel: np.ndarray,
    attention_score_vector: np.ndarray,
    gru_kernel: np.ndarray,
    gru_recurrent_kernel: np.ndarray,
    gru_bias: np.ndarray,
    write_addressing: dict | None = None,
    erase_kernel: np.ndarray | None = None,
    erase_bias: np.ndarray | None = None,
    add_kernel: np.ndarray | None = None,
    add_bias: np.ndarray | None = None,
    query_state: bool = False,
) -> dict:
    """One MemDec decoder step (Wang et al. 2016, Eq. 4-13), written from the equations.

        w^r_t   = Address_r(s_{t-1}, M_{t-1}, w_{t-1})            (Eq. 10-12)
                  (addressing "shared_weights": w^r_t = w_{t-1}, no addressing)
        r_{t-1} = sum_i w^r_t(i) M_{t-1}(i)                        (Eq. 4)
        s~_t    = tanh(W^r r_{t-1} + W^y e + b)                    (Eq. 5; query_kernel
                  rows [0:m] = W^r, [m:] = W^y)
                  query_state: tanh(W^r r_{t-1} + W^s s_{t-1} + W^y e + b), rows
                  [0:m] = W^r, [m:m+U] = W^s, [m+U:] = W^y (our addition)
        c_t     = additive attention with query s~_t               (Eq. 6, 3)
        s_t     = GRU(s_{t-1}, [e; c_t; r_{t-1}])                  (Eq. 7)
        w^w_t   = Address_w(s_t, M_{t-1}, w^r_t)   (Address_w = Address_r unless "separate")
        M_t(i)  = M_{t-1}(i) (1 - w^w_t(i) mu^ers) + w^w_t(i) mu^add   (Eq. 13, add eq.)
                  mu^ers = sigmoid(W^ers s_t + b), mu^add = sigmoid(W^add s_t + b)
                  (M_t = M_{t-1} when `write` is False)
        w_t     = w^r_t if "separate" else w^w_t                   (the carried weights)
        o_t     = [s_t; c_t; e]

    `read_addressing` / `write_addressing` hold the keyword arguments of
    `memory_addressing` (memory_kernel, state_kernel, score_vector,
    gate_kernel, gate_bias).

    Args:
        embedded: `(B, E)`; s_prev: `(B, U)`; memory: `(B, n, m)`;
        previous_weights: `(B, n)`; annotations: `(B, Tx, D)`; mask: `(B, Tx)`.

    Returns:
        dict with "output" `(B, U + D + E)`, "state" `(B, U)`, "memory"
        `(B, n, m)`, "weights" (carried, `(B, n)`), "attention" `(B, Tx)`,
        "read_weights", "write_weights" (None if not computed), "erase", "add".
    """
    embedded, s_prev, memory, previous_weights = _f64(embedded, s_prev, memory, previous_weights)
    batch, n, m = memory.shape
    if addressing == "shared_weights":
        read_weights = previous_weights
    else:
        read_weights, _, _ = memory_addressing(
            s_prev, memory, previous_weights, nonlinearity=address_nonlinearity, **read_addressing
        )
    read = np.zeros((batch, m))
    for i in range(n):
        read += read_weights[:, i : i + 1] * memory[:, i]
    query_inputs = [read, s_prev, embedded] if query_state else [read, embedded]
    query = np.tanh(dense(np.concatenate(query_inputs, -1), query_kernel, query_bias))
    context, attention = additive_attention(
        query,
        annotations,
        mask,
        attention_query_kernel,
        attention_key_kernel,
        attention_score_vector,
    )
    state = gru_step(
        np.concatenate([embedded, context, read], -1),
        s_prev,
        gru_kernel,
        gru_recurrent_kernel,
        gru_bias,
    )
    shared = addressing != "separate"
    write_params = read_addressing if shared else write_addressing
    write_weights = erase = add = None
    if shared or write:
        write_weights, _, _ = memory_addressing(
            state, memory, read_weights, nonlinearity=address_nonlinearity, **write_params
        )
    new_memory = memory.copy()
    if write:
        erase = sigmoid(dense(state, erase_kernel, erase_bias))
        add = sigmoid(dense(state, add_kernel, add_bias))
        for i in range(n):
            w = write_weights[:, i : i + 1]
            new_memory[:, i] = memory[:, i] * (1.0 - w * erase) + w * add
    return {
        "output": np.concatenate([state, context, embedded], -1),
        "state": state,
        "memory": new_memory,
        "weights": write_weights if shared else read_weights,
        "attention": attention,
        "read_weights": read_weights,
        "write_weights": write_weights,
        "erase": erase,
        "add": add,
    }


def lstm_step(
    x: np.ndarray,
    h_prev: np.ndarray,
    c_prev: np.ndarray,
    kernel: np.ndarray,
    recurrent_kernel: np.ndarray,
    bias: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """One LSTM step (Yum & Mu, Eq. 8-12) with `keras.layers.LSTMCell`'s weights.

    Kernel columns are ordered `[i | f | c | o]`; `bias` is `(4U,)`.

        i = sigmoid(x W_i + h U_i + b_i)   f = sigmoid(x W_f + h U_f + b_f)
        o = sigmoid(x W_o + h U_o + b_o)   c_t = f * c_{t-1} + i * tanh(x W_c + h U_c + b_c)
        h_t = o * tanh(c_t)

    Returns:
        `(h_t, c_t)`.
    """
    x, h, c, kernel, recurrent_kernel, bias = _f64(x, h_prev, c_prev, kernel, recurrent_kernel, bias)
    units = h.shape[-1]
    pre = x @ kernel + h @ recurrent_kernel + bias
    i, f, g, o = (pre[:, k * units : (k + 1) * units] for k in range(4))
    c_t = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c_t), c_t


def gated_merge(
    s: np.ndarray,
    z: np.ndarray,
    kernel: np.ndarray,
    gate_kernel: np.ndarray,
    candidate_kernel: np.ndarray,
    bias: np.ndarray,
) -> np.ndarray:
    """The gated recurrent function of Yum & Mu §2.2 (Eq. 4-7) with input `s` and state `z`.

        u  = sigmoid(W_u s + U_u z + b_u)
        r  = sigmoid(W_r s + U_r z + b_r)
        h~ = tanh(W s + U (r * z) + b)
        h  = u * h~ + (1 - u) * z

    Weights of `layers.rmn.GatedMerge`: kernel columns `[u | r | h]`, `gate_kernel`
    `[U_u | U_r]`, `candidate_kernel` `U`, bias `(3U,)`.
    """
    s, z, kernel, gate_kernel, candidate_kernel, bias = _f64(s, z, kernel, gate_kernel, candidate_kernel, bias)
    units = z.shape[-1]

    def part(i: int) -> slice:
        return slice(i * units, (i + 1) * units)

    u = sigmoid(s @ kernel[:, part(0)] + z @ gate_kernel[:, part(0)] + bias[part(0)])
    r = sigmoid(s @ kernel[:, part(1)] + z @ gate_kernel[:, part(1)] + bias[part(1)])
    candidate = np.tanh(s @ kernel[:, part(2)] + (r * z) @ candidate_kernel + bias[part(2)])
    return u * candidate + (1.0 - u) * z


def memory_block_read(
    query: np.ndarray, keys: np.ndarray, values: np.ndarray, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """The RMN memory read (Yum & Mu, Eq. 16-17) over the `count` most recent words.

        P_t = softmax(M_i q_t),  s_t = C_i^T P_t

    Args:
        query: `(B, d)`; keys, values: `(B, n, d)`, the rows `M_i` and `C_i` of the
            memory slots, slot 0 the most recent word; count: how many slots hold a
            word (the others get weight exactly 0).

    Returns:
        `(s_t (B, d), P_t (B, n))`.
    """
    query, keys, values = _f64(query, keys, values)
    batch, n, _ = keys.shape
    scores = np.zeros((batch, n))
    for i in range(n):
        scores[:, i] = np.sum(keys[:, i] * query, axis=-1)
    weights = masked_softmax(scores, np.broadcast_to(np.arange(n) < count, (batch, n)))
    read = np.zeros((batch, values.shape[2]))
    for i in range(n):
        read += weights[:, i : i + 1] * values[:, i]
    return read, weights
