"""A fake decoder and pure-Python references for the decoding tests (no model).

`FakeDecoder` is a tiny "Markov chain with memory": the next token's logits
depend on the previous token, on a decaying history of all earlier tokens (a
recurrent state, so beam search must reorder states correctly), on a
per-sentence bias (so sentences differ) and on the masked mean of a
pass-through source memory `(B, Tx)` with its mask `(B, Tx)` (so padding must
not matter). Its attention is a masked softmax over that memory.

`table_decoder` is a plain per-sentence Markov chain with hand-set
probabilities, for targeted cases.

`FakeDecoder.step` is the same model in NumPy float64, one hypothesis at a
time; `brute_force` enumerates every hypothesis with it, `score_np` scores
one, and `reference_greedy` and `reference_beam` are list-based
re-implementations of the documented algorithms.
"""

from __future__ import annotations

import numpy as np
from keras import ops

from keras_memnmt.decoding.common import LENGTH_PENALTIES

PAD, UNK, BOS, EOS = 0, 1, 2, 3
DECAY = 0.5


def lp_np(length: int, kind: str, alpha: float = 0.6) -> float:
    assert kind in LENGTH_PENALTIES
    if kind == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    return float(length) if kind == "average" else 1.0


def log_softmax_np(x: np.ndarray) -> np.ndarray:
    x = x - x.max()
    return x - np.log(np.exp(x).sum())


class FakeDecoder:
    """A seeded fake decoder for `num_sentences` sentences over `vocab_size` tokens."""

    def __init__(
        self,
        seed: int = 0,
        vocab_size: int = 5,
        num_sentences: int = 3,
        tx: int = 4,
        eos_bias: float = -1.0,
    ):
        rng = np.random.default_rng(seed)
        v = vocab_size
        self.vocab_size = v
        self.transition = rng.normal(0.0, 1.5, (v, v)).astype("float32")  # (V, V)
        self.transition[:, EOS] += eos_bias  # longer hypotheses, so length penalties matter
        self.history_weight = rng.normal(0.0, 1.0, (v,)).astype("float32")  # (V,)
        self.memory_weight = rng.normal(0.0, 1.0, (v,)).astype("float32")  # (V,)
        self.sentence_bias = rng.normal(0.0, 1.0, (num_sentences, v)).astype("float32")
        self.memory = rng.normal(0.0, 1.0, (num_sentences, tx)).astype("float32")
        # Sentence s has tx - s % tx real memory positions (at least 1).
        self.memory_lengths = [tx - s % tx for s in range(num_sentences)]
        self.tx = tx

    # ----- keras side -------------------------------------------------------------

    def initial_states(self, sentences: list[int], tx: int | None = None) -> list[np.ndarray]:
        """`[bias (B, V), history (B, V), memory (B, Tx'), mask (B, Tx')]`.

        Positions past a sentence's memory length are padding: garbage values
        with mask 0. `tx` (>= self.tx) pads further.
        """
        tx = self.tx if tx is None else tx
        rng = np.random.default_rng(1000 + tx)
        memory = rng.normal(0.0, 100.0, (len(sentences), tx)).astype("float32")
        mask = np.zeros((len(sentences), tx), "float32")
        for row, s in enumerate(sentences):
            n = self.memory_lengths[s]
            memory[row, :n] = self.memory[s, :n]
            mask[row, :n] = 1.0
        bias = self.sentence_bias[sentences]
        history = np.zeros_like(bias)
        return [bias, history, memory, mask]

    def next_fn(self, tokens, states):
        """`tokens (N,)`, `[bias, history, memory, mask]` -> `(logits (N, V), states, attention (N, Tx))`."""
        bias, history, memory, mask = states
        tokens = ops.cast(tokens, "int32")
        history = DECAY * history + ops.one_hot(tokens, self.vocab_size, dtype="float32")
        mean = ops.sum(memory * mask, axis=1) / ops.sum(mask, axis=1)  # (N,)
        logits = (
            ops.take(ops.convert_to_tensor(self.transition), tokens, axis=0)
            + bias
            + history * self.history_weight
            + mean[:, None] * self.memory_weight
        )
        # Attention depends on the whole history, so a wrongly reordered beam shows.
        sharpness = 1.0 + ops.sum(history * self.history_weight, axis=1)  # (N,)
        scores = memory * sharpness[:, None]  # (N, Tx)
        scores = ops.where(mask > 0, scores, -1e9)
        weights = ops.exp(scores - ops.max(scores, axis=1, keepdims=True)) * mask
        attention = weights / ops.sum(weights, axis=1, keepdims=True)
        return logits, [bias, history, memory, mask], attention

    # ----- numpy side -------------------------------------------------------------

    def initial_state_np(self, s: int) -> np.ndarray:
        return np.zeros(self.vocab_size)  # the history

    def step(self, s: int, token: int, history: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One hypothesis of sentence `s`: `(log p (V,) float64, new history)`."""
        history = DECAY * history + np.eye(self.vocab_size)[token]
        n = self.memory_lengths[s]
        mean = self.memory[s, :n].astype(np.float64).mean()
        logits = (
            self.transition[token].astype(np.float64)
            + self.sentence_bias[s]
            + history * self.history_weight
            + mean * self.memory_weight
        )
        return log_softmax_np(logits), history

    def generable(self) -> list[int]:
        return [t for t in range(self.vocab_size) if t not in (PAD, BOS)]


def table_decoder(tables: np.ndarray):
    """A Markov chain per sentence: `tables (S, V, V)` of next-token probabilities.

    Returns `(next_fn, initial_states(sentences))`; the only state is the
    sentence id `(B, 1)` and there is no attention.
    """
    s, v, _ = tables.shape
    logits = np.log(tables).reshape(s * v, v).astype("float32")  # (S*V, V)

    def next_fn(tokens, states):
        (sentence,) = states
        rows = ops.cast(sentence[:, 0], "int32") * v + ops.cast(tokens, "int32")  # (N,)
        return ops.take(ops.convert_to_tensor(logits), rows, axis=0), [sentence], None

    def initial_states(sentences: list[int]) -> list[np.ndarray]:
        return [np.array(sentences, "float32")[:, None]]

    return next_fn, initial_states


def brute_force(
    model: FakeDecoder, s: int, max_length: int, kind: str, alpha: float = 0.6
) -> list[tuple[float, float, list[int]]]:
    """Every hypothesis of sentence `s` as `(score, raw, tokens)`, best first.

    A hypothesis ends with eos at any length `<= max_length`, or is
    force-finished at `max_length` without eos.
    """
    hyps: list[tuple[float, float, list[int]]] = []

    def grow(tokens: list[int], raw: float, history: np.ndarray) -> None:
        logp, history = model.step(s, tokens[-1] if tokens else BOS, history)
        for t in model.generable():
            new_raw, new_tokens = raw + logp[t], [*tokens, t]
            if t == EOS or len(new_tokens) == max_length:
                hyps.append((new_raw / lp_np(len(new_tokens), kind, alpha), new_raw, new_tokens))
            else:
                grow(new_tokens, new_raw, history)

    grow([], 0.0, model.initial_state_np(s))
    return sorted(hyps, key=lambda h: -h[0])


def score_np(
    model: FakeDecoder, s: int, tokens: list[int], kind: str, alpha: float = 0.6
) -> tuple[float, float]:
    """`(score, raw)` of one given hypothesis of sentence `s`."""
    raw, history = 0.0, model.initial_state_np(s)
    for prev, token in zip([BOS, *tokens[:-1]], tokens, strict=True):
        logp, history = model.step(s, prev, history)
        raw += logp[token]
    return raw / lp_np(len(tokens), kind, alpha), raw


def reference_greedy(model: FakeDecoder, s: int, max_length: int) -> tuple[list[int], float]:
    tokens, raw, history = [], 0.0, model.initial_state_np(s)
    while len(tokens) < max_length and (not tokens or tokens[-1] != EOS):
        logp, history = model.step(s, tokens[-1] if tokens else BOS, history)
        logp[[PAD, BOS]] = -np.inf
        t = int(np.argmax(logp))
        tokens.append(t)
        raw += logp[t]
    return tokens, raw


def reference_beam(
    model: FakeDecoder,
    s: int,
    beam_size: int,
    max_length: int,
    kind: str,
    alpha: float = 0.6,
    n_best: int = 1,
    early_stopping: bool = True,
) -> list[tuple[float, float, list[int]]]:
    """`beam_search`'s documented algorithm, one sentence, with Python lists."""
    k = beam_size
    alive = [(0.0, [], model.initial_state_np(s))]  # (raw, tokens, history), best first
    finished: list[tuple[float, float, list[int]]] = []
    for i in range(max_length):
        cands = []
        for raw, tokens, history in alive:
            logp, new_history = model.step(s, tokens[-1] if tokens else BOS, history)
            cands += [(raw + logp[t], [*tokens, t], new_history) for t in model.generable()]
        cands = sorted(cands, key=lambda c: -c[0])[: 2 * k]
        is_final = [c[1][-1] == EOS or i + 1 >= max_length for c in cands]
        alive = [c for c, f in zip(cands, is_final, strict=True) if not f][:k]
        for rank, (c, f) in enumerate(zip(cands, is_final, strict=True)):
            if f and rank < k:
                finished.append((c[0] / lp_np(i + 1, kind, alpha), c[0], c[1]))
        finished = sorted(finished, key=lambda h: -h[0])[:k]
        if i + 1 >= max_length or not alive:
            break
        bound = alive[0][0] / lp_np(max_length, kind, alpha)
        if len(finished) >= n_best and finished[n_best - 1][0] > bound:
            break
        if early_stopping and len(finished) >= k:
            break
    return finished[:n_best]


def unpad(row: np.ndarray, length: int) -> list[int]:
    return [int(t) for t in row[:length]]
