"""NumPy reference implementations of the layers' equations, for tests.

Written from the papers' equations, not by calling the layers: each function
takes the layer's weights as NumPy arrays (Keras' row-vector convention,
`y = x @ kernel + bias`) and computes one step in float64 with explicit loops
over source positions where the paper sums. Compare a layer against these to
about 1e-5.

Papers: 000 = MemDec (Wang et al. 2016), 001 = Yum & Mu (Cho et al.
encoder-decoder), 002 = Salton et al. 2017 (Luong scores), 003 = Bahdanau et
al. 2014 notes.
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
    """Eq. 3 (paper 000): c = sum_j alpha_j h_j, `(B, Tx), (B, Tx, D) -> (B, D)`."""
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
    """Bahdanau: e_j = v_a^T tanh(W_a q + U_a h_j) (paper 000, after Eq. 3).

    Args:
        query: `(B, Q)`; annotations: `(B, Tx, D)`; mask: `(B, Tx)` or None.
        query_kernel: `(Q, A)` = W_a^T; key_kernel: `(D, A)` = U_a^T;
        score_vector: `(A,)` = v_a.

    Returns:
        `(context (B, D), weights (B, Tx))`.
    """
    query, annotations, w_a, u_a, v_a = _f64(
        query, annotations, query_kernel, key_kernel, score_vector
    )
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
    """Luong scores (paper 002, Eq. 7-9, read as in Luong et al. 2015).

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

    z = sigmoid(
        x @ kernel[:, part(0)]
        + bias[0, part(0)]
        + h @ recurrent_kernel[:, part(0)]
        + bias[1, part(0)]
    )
    r = sigmoid(
        x @ kernel[:, part(1)]
        + bias[0, part(1)]
        + h @ recurrent_kernel[:, part(1)]
        + bias[1, part(1)]
    )
    hh = np.tanh(
        x @ kernel[:, part(2)]
        + bias[0, part(2)]
        + r * (h @ recurrent_kernel[:, part(2)] + bias[1, part(2)])
    )
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
    pooled = np.stack(
        [annotations[b][mask[b] != 0].mean(axis=0) for b in range(annotations.shape[0])]
    )
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
    """One RNNsearch decoder step (paper 000, Eq. 2-3 and §2.1).

        q   = tanh(W [s_{t-1}; e] + b)   if feedback_attention, else s_{t-1}
        c_t = sum_j alpha_j h_j,  alpha = softmax(v_a^T tanh(W_a q + U_a h_j))
        s_t = GRU(s_{t-1}, [e; c_t])
        o_t = [s_t; c_t; e]

    Returns:
        `(o_t (B, U + D + E), s_t (B, U), alpha (B, Tx))`.
    """
    embedded, s_prev = _f64(embedded, s_prev)
    if feedback_attention:
        query = np.tanh(
            dense(np.concatenate([s_prev, embedded], -1), feedback_kernel, feedback_bias)
        )
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
    state = gru_step(
        np.concatenate([embedded, context], -1), s_prev, gru_kernel, gru_recurrent_kernel, gru_bias
    )
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
    state = gru_step(
        np.concatenate([embedded, context], -1), s_prev, gru_kernel, gru_recurrent_kernel, gru_bias
    )
    return np.concatenate([state, context, embedded], -1), state
