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
time (any object with `step` and `initial_state_np` will do); `score_np` scores
one hypothesis with it. The references follow the searches' token rules
(`keras_memnmt.decoding.common`): `allowed` bans what the rules ban at one
step (pad and bos; eos is the only token at a sentence's last allowed
position, so every hypothesis ends with eos; `min_length`;
`no_repeat_ngram_size`; a target prefix), `ruled_brute_force` enumerates
every hypothesis they allow, and `ruled_greedy` and `ruled_beam` are
list-based re-implementations of the documented algorithms under them.
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

    def counted_next_fn(self, rows: list[int]):
        """`next_fn` that also appends to `rows` the number of rows `N` of each call (what
        compaction leaves in the loop)."""

        def next_fn(tokens, states):
            rows.append(int(tokens.shape[0]))
            return self.next_fn(tokens, states)

        return next_fn

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


def score_np(model: FakeDecoder, s: int, tokens: list[int], kind: str, alpha: float = 0.6) -> tuple[float, float]:
    """`(score, raw)` of one given hypothesis of sentence `s`."""
    raw, history = 0.0, model.initial_state_np(s)
    for prev, token in zip([BOS, *tokens[:-1]], tokens, strict=True):
        logp, history = model.step(s, prev, history)
        raw += logp[token]
    return raw / lp_np(len(tokens), kind, alpha), raw


def allowed(
    logp: np.ndarray, tokens: list[int], limit: int, min_length: int = 0, ngram: int = 0, prefix: tuple[int, ...] = ()
) -> np.ndarray:
    """`logp (V,)` of the token after `tokens`, with what the rules ban at `-inf`: pad and
    bos; inside the `prefix` every token but its own, else at the last allowed position
    (`len(tokens) + 1 == limit`) every token but eos; otherwise eos while
    `len(tokens) < min_length`, and each token that would complete an n-gram of `ngram`
    tokens already in `tokens`."""
    logp = np.array(logp, np.float64)
    logp[[PAD, BOS]] = -np.inf
    i = len(tokens)
    only = prefix[i] if i < len(prefix) else EOS if i + 1 >= limit else None
    if only is not None:
        kept = np.full_like(logp, -np.inf)
        kept[only] = logp[only]
        return kept
    if i < min_length:
        logp[EOS] = -np.inf
    if ngram:
        for j in range(i - ngram + 1):  # every n-gram tokens[j : j + ngram] so far
            if tokens[j : j + ngram - 1] == tokens[i - ngram + 1 :]:
                logp[tokens[j + ngram - 1]] = -np.inf
    return logp


def has_repeated_ngram(tokens: list[int], n: int) -> bool:
    grams = [tuple(tokens[j : j + n]) for j in range(len(tokens) - n + 1)]
    return len(set(grams)) < len(grams)


def ruled_greedy(model, s: int, limit: int, **rules) -> tuple[list[int], float]:
    """Greedy search under the rules: the best allowed token until eos."""
    tokens, raw, history = [], 0.0, model.initial_state_np(s)
    while not tokens or tokens[-1] != EOS:
        logp, history = model.step(s, tokens[-1] if tokens else BOS, history)
        logp = allowed(logp, tokens, limit, **rules)
        tokens.append(int(np.argmax(logp)))
        raw += logp[tokens[-1]]
    return tokens, raw


def ruled_brute_force(
    model, s: int, limit: int, kind: str, alpha: float = 0.6, **rules
) -> list[tuple[float, float, list[int]]]:
    """Every hypothesis the rules allow (each ends with eos, by the limit at the latest),
    as `(score, raw, tokens)`, best first."""
    hyps = []

    def grow(tokens, raw, history):
        logp, history = model.step(s, tokens[-1] if tokens else BOS, history)
        logp = allowed(logp, tokens, limit, **rules)
        for t in np.flatnonzero(logp > -np.inf):
            new_raw, new_tokens = raw + logp[t], [*tokens, int(t)]
            if t == EOS:
                hyps.append((new_raw / lp_np(len(new_tokens), kind, alpha), new_raw, new_tokens))
            else:
                grow(new_tokens, new_raw, history)

    grow([], 0.0, model.initial_state_np(s))
    return sorted(hyps, key=lambda h: -h[0])


def ruled_beam(
    model,
    s: int,
    beam_size: int,
    limit: int,
    kind: str,
    alpha: float = 0.6,
    n_best: int = 1,
    early_stopping: bool = True,
    moved_bans: list | None = None,
    **rules,
) -> list[tuple[float, float, list[int]]]:
    """`beam_search`'s documented algorithm, one sentence, with lists, under the rules.

    `moved_bans`, if given, gets one entry per step from the third on where a hypothesis
    that the step before moved to another beam slot (the beam's reordering) has a
    candidate banned by `min_length` or `no_repeat_ngram_size` that would otherwise have
    been among the `2K` best: a step where a search that read the bans from the wrong
    slot's tokens could go wrong.
    """
    k = beam_size
    alive = [(0.0, [], model.initial_state_np(s), 0)]  # (raw, tokens, history, slot it came from)
    finished: list[tuple[float, float, list[int]]] = []
    for i in range(limit):
        cands, banned = [], []
        for slot, (raw, tokens, history, origin) in enumerate(alive):
            logp, new_history = model.step(s, tokens[-1] if tokens else BOS, history)
            ruled, free = allowed(logp, tokens, limit, **rules), allowed(logp, tokens, limit)
            cands += [(raw + ruled[t], [*tokens, int(t)], new_history, slot) for t in np.flatnonzero(ruled > -np.inf)]
            if i >= 2 and origin != slot:
                banned += [raw + free[t] for t in np.flatnonzero((free > -np.inf) & (ruled == -np.inf))]
        cands = sorted(cands, key=lambda c: -c[0])[: 2 * k]
        if moved_bans is not None and banned and (len(cands) < 2 * k or max(banned) > cands[-1][0]):
            moved_bans.append(i)
        for rank, c in enumerate(cands):
            if c[1][-1] == EOS and rank < k:
                finished.append((c[0] / lp_np(i + 1, kind, alpha), c[0], c[1]))
        alive = [c for c in cands if c[1][-1] != EOS][:k]
        finished = sorted(finished, key=lambda h: -h[0])[:k]
        if i + 1 >= limit or not alive:
            break
        bound = alive[0][0] / lp_np(limit, kind, alpha)
        if len(finished) >= n_best and finished[n_best - 1][0] > bound:
            break
        if early_stopping and len(finished) >= k:
            break
    return finished[:n_best]


def unpad(row: np.ndarray, length: int) -> list[int]:
    return [int(t) for t in row[:length]]
