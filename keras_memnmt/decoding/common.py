"""Pieces shared by greedy and beam search.

The step callback contract (the model provides it)::

    next_fn(tokens, states) -> (logits, new_states, attention)

    tokens      (N,) int32            the previous target token of each row
    states      list of (N, ...)      the decoder's states, each batch first
    logits      (N, V) float          unnormalized scores of the next token
    new_states  list of (N, ...)      as many as `states`, the same shapes
                                      after the batch axis and the same dtypes
    attention   (N, Tx) float | None  attention weights of this step

A state is one tensor whose first axis is the batch, of any rank and dtype after
it: a recurrent cell's `(N, units)` vector, pass-through encoder memory such as
the annotations `(N, Tx, D)` (or flattened, `(N, Tx*D)`) and the source mask
`(N, Tx)`, a window of recent inputs `(N, K, E)`, a Transformer's key/value
caches `(N, 2, L, H, D/H)`. The searches only take, repeat and drop rows of it
along that axis. The states are a flat list (or tuple) of such tensors, not a
nested structure.

A state that does not change (pass-through memory) should be returned as the
very tensor `next_fn` was given: beam search then does not reorder it.

A state may also grow along an axis after the batch, by the same amount at every step
(a Transformer's key/value caches gain one position per step, so that a step reads
the positions so far and no more), where the loop's shapes may change
(`shapes_may_change`: TensorFlow and PyTorch). The searches compare the shapes of the
first call's states with the initial ones (`growing_axes`) and leave those axes free
in the loop (`while_loop`); on JAX, whose loop keeps every shape, a growing state is an
error.

`N` is the batch `B` in greedy search and `B * K` in beam search (row
`b * K + k` is beam `k` of sentence `b`). The first call of each search gets
`N = B` (every beam starts from the same bos state), later calls `N = B * K`.

Compaction (both searches, `compact=True`, the default except on JAX): once
at least 1/8 of the sentences in the loop are done (and not all), their
results are written to a `(B, ·)` store at their batch rows and their rows
leave the loop's tensors, so `next_fn` is called on fewer rows (about 40% fewer
over a test set sorted by source length, beam 5). The loop's batch dimension
then changes from one iteration to the next: TensorFlow's `tf.while_loop`
allows that with shape invariants and PyTorch's loop is Python, but JAX's
`lax.while_loop` keeps every shape. A search's carry names the rows by
convention: `last` and `states` have one row per hypothesis, everything else
one per sentence, `sentence` its batch row.

Precision: the searches' scores and attention buffers are float32 whatever
the model's compute dtype (`normalizer` casts the logits up before the
log-softmax; the attention is cast up before it is stored); the states keep
the dtype `next_fn` gives them.

Vocabulary decision: the pad and bos ids are never generated. Their
log-probabilities are set to `-inf` *after* the log-softmax over the full
vocabulary, so every reported score stays the model's own log-probability. The
searches' other bans (`step_bans`) are applied the same way: `min_length` (eos is
`-inf` while a hypothesis has fewer than `min_length` tokens, target prefix included)
and `no_repeat_ngram_size` (fairseq's rule: a token that would complete an n-gram of
that size already in the hypothesis, prefix included, is `-inf`).

Length decision (fairseq's `SequenceGenerator`): a sentence's limit counts eos, and
at a hypothesis' last allowed position (`step + 1 == limit`) eos is its only token
(`forced_tokens`). So every returned hypothesis ends with eos and its score counts
eos's log-probability: it is the teacher-forced score of the same tokens followed by
eos (`memnmt score`). Which token a row may take, first rule first: a target prefix's
token inside the prefix; eos at the limit; otherwise any token but the banned ones
(`min_length` and `no_repeat_ngram_size` yield to both before).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np
from keras import ops

from keras_memnmt.decoding.settings import LENGTH_PENALTIES, parse_sampling  # noqa: F401  (re-exported)

Tensor = Any
NextFn = Callable[[Tensor, list[Tensor]], tuple[Tensor, list[Tensor], Tensor | None]]

NEG_INF = float("-inf")


def length_penalty(lengths: Tensor, kind: str = "gnmt", alpha: float = 0.6) -> Tensor:
    """The divisor that length-normalizes a hypothesis' log-probability.

    * `"gnmt"`: `lp(Y) = ((5 + |Y|) / 6) ** alpha` (Wu et al. 2016, Eq. 14);
    * `"average"`: `lp(Y) = |Y|`;
    * `"none"`: `lp(Y) = 1`.

    `|Y|` counts the eos token (every hypothesis ends with one, see the module docstring).

    Args:
        lengths: any shape, int or float; `|Y|` of each hypothesis.
        kind: one of `"gnmt"`, `"average"`, `"none"`.
        alpha: the GNMT exponent (ignored by the other kinds).

    Returns:
        float32 tensor of the shape of `lengths`; `score = log P(Y) / lp(Y)`.
    """
    check_length_penalty(kind)
    lengths = ops.cast(lengths, "float32")
    if kind == "gnmt":
        return ops.power((5.0 + lengths) / 6.0, alpha)
    if kind == "average":
        return lengths
    return ops.ones_like(lengths)


def check_length_penalty(kind: str) -> None:
    if kind not in LENGTH_PENALTIES:
        raise ValueError(f"length_penalty must be one of {LENGTH_PENALTIES}; received: {kind!r}")


def check_ids(bos_id: int, eos_id: int, pad_id: int) -> None:
    if eos_id in (bos_id, pad_id):
        raise ValueError(
            f"eos_id must differ from bos_id and pad_id; received: eos_id={eos_id}, bos_id={bos_id}, pad_id={pad_id}"
        )


def check_beam(bos_id: int, eos_id: int, pad_id: int, length_penalty: str, beam_size: int, n_best: int) -> None:
    """The arguments the beam searches share, each a one-line `ValueError` naming it."""
    check_ids(bos_id, eos_id, pad_id)
    check_length_penalty(length_penalty)
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_size must be an int >= 1; received: {beam_size!r}")
    if not isinstance(n_best, int) or not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best must be an int in [1, beam_size={beam_size}]; received: {n_best!r}")


def check_search_limits(min_length: int, no_repeat_ngram_size: int) -> None:
    """`min_length` and `no_repeat_ngram_size`, each an int >= 0, or a one-line `ValueError` naming it."""
    for name, value in (("min_length", min_length), ("no_repeat_ngram_size", no_repeat_ngram_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be an int >= 0; received: {value!r}")


def resolve_max_length(max_length: int | Tensor, batch_size: int, max_steps: int | None) -> tuple[int, Tensor]:
    """Turn `max_length` into a static loop bound and a per-sentence limit.

    Args:
        max_length: a Python int, or a `(B,)` tensor of per-sentence limits.
        batch_size: `B`.
        max_steps: the static width `L` of the output buffers. Defaults to
            `max_length` (int) or to the largest entry of the tensor; the
            latter reads the tensor's value, so pass `max_steps` explicitly
            when tracing (`jax.jit`, `tf.function`).

    Returns:
        `(L, limit)`: the Python int `L` and a `(B,)` int32 tensor of
        per-sentence limits clipped to `[1, L]`.
    """
    if isinstance(max_length, (int, np.integer)):
        if max_length < 1:
            raise ValueError(f"max_length must be >= 1; received: {max_length}")
        steps = int(max_length) if max_steps is None else int(max_steps)
        limit = ops.full((batch_size,), min(int(max_length), steps), dtype="int32")
    else:
        limit = ops.reshape(ops.cast(max_length, "int32"), (batch_size,))  # (B,)
        if max_steps is None:
            try:
                steps = int(np.max(ops.convert_to_numpy(limit)))
            except Exception as error:  # a traced tensor has no value
                raise ValueError(
                    "max_length is a traced tensor; pass max_steps (the static buffer width) as well"
                ) from error
        else:
            steps = int(max_steps)
        limit = ops.clip(limit, 1, max(steps, 1))
    if steps < 1:
        raise ValueError(f"max_steps must be >= 1; received: {steps}")
    return steps, limit


def normalizer(
    logits: Tensor, banned_ids: tuple[int, ...], forced: Tensor | None = None, blocked: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """`(N, V)` logits -> float32 logits with `-inf` at `banned_ids` `(N, V)`, and the
    row maximum `(N, 1)` and `log(sum(exp(logits - max)))` `(N, 1)` of the logits as given.

    A log-probability is `(logit - max) - log_sum` (`log_probs`), the steps of a
    log-softmax, written out so that beam search can score a few candidates with the
    same arithmetic as the whole row (`beam.candidates`).

    `forced` `(N,)` int32: a row whose entry is a token id (`>= 0`) may only take that
    token (a target prefix's, or eos at the limit: `forced_tokens`): every other token is
    `-inf` as well; `-1` leaves the row free. `blocked` `(N, V)` or `(1, V)` bool: more
    tokens set to `-inf` in the free rows (`step_bans`). The normalizer stays that of the
    whole row, so a forced token's score is its log-probability under the model.
    """
    x = ops.cast(logits, "float32")
    top = ops.max(x, axis=-1, keepdims=True)  # (N, 1)
    log_sum = ops.log(ops.sum(ops.exp(x - top), axis=-1, keepdims=True))  # (N, 1)
    vocab = ops.arange(x.shape[-1], dtype="int32")  # (V,)
    banned = ops.zeros_like(vocab) > 0
    for token in banned_ids:
        banned = banned | (vocab == token)
    if forced is None:
        if blocked is not None:
            banned = banned | blocked
    else:
        forced = ops.cast(forced, "int32")[:, None]  # (N, 1)
        free = forced < 0  # (N, 1)
        banned = banned[None, :] | (ops.logical_not(free) & (vocab[None, :] != forced))  # (N, V)
        if blocked is not None:
            banned = banned | (blocked & free)
    return ops.where(banned, NEG_INF, x), top, log_sum


def log_probs(
    logits: Tensor, banned_ids: tuple[int, ...], forced: Tensor | None = None, blocked: Tensor | None = None
) -> Tensor:
    """`(N, V)` logits -> `(N, V)` float32 log-probabilities, `-inf` at `banned_ids`
    (and, in a row with a `forced` token, at every other token, in a free row at its
    `blocked` tokens; see `normalizer`)."""
    x, top, log_sum = normalizer(logits, banned_ids, forced, blocked)
    return (x - top) - log_sum


def forced_tokens(carry: dict, eos_id: int) -> Tensor:
    """`(A,)` the token each sentence of the carry must take at this step, `-1` where it
    is free: its target prefix's token while the step is inside the prefix (the carry's
    `prefix` `(A, P)` and `prefix_length` `(A,)`), else eos at its last allowed position
    (`step + 1 >= limit`, the carry's `limit` `(A,)`; see the module docstring)."""
    step, limit = carry["step"], carry["limit"]
    forced = ops.where(step + 1 >= limit, eos_id, -1)  # (A,)
    prefix = carry.get("prefix")
    if prefix is None or not prefix.shape[1]:
        return forced
    width = prefix.shape[1]
    token = ops.take_along_axis(prefix, ops.zeros_like(prefix[:, :1]) + ops.minimum(step, width - 1), axis=1)
    return ops.where(step < carry["prefix_length"], token[:, 0], forced)


def repeated_ngrams(history: Tensor, step: Tensor, size: int, vocab: int) -> Tensor | None:
    """`(N, V)` bool: the tokens that would complete, after the first `step` tokens of each
    row of `history` `(N, L)`, an n-gram of `size` tokens already among them (fairseq's
    `no_repeat_ngram_size`); `None` where no n-gram fits in `L`.

    The n-gram starting at `j` (`j + size <= step`) bans its last token where its first
    `size - 1` tokens equal the row's last `size - 1`; with `size == 1` every token so
    far is banned.
    """
    width = history.shape[1]
    count = width - size + 1  # n-grams the buffer holds
    if count < 1:
        return None
    history = ops.cast(history, "int32")
    hit = ops.arange(count, dtype="int32")[None, :] + size <= step  # (1, W): within the first `step` tokens
    for t in range(size - 1):
        at = ops.zeros_like(history[:, :1]) + ops.clip(step - size + 1 + t, 0, width - 1)  # (N, 1)
        hit = hit & (history[:, t : t + count] == ops.take_along_axis(history, at, axis=1))  # (N, W)
    column = ops.where(hit, history[:, size - 1 :], vocab)  # (N, W): the token to ban, or the spare column V
    row = ops.cumsum(ops.ones_like(column), axis=0) - 1  # (N, W) each entry's row
    indices = ops.reshape(ops.stack([row, column], axis=-1), (-1, 2))  # (N*W, 2)
    marks = ops.zeros_like(history[:, :1]) + ops.zeros((1, vocab + 1), dtype="int32")  # (N, V+1)
    marks = ops.scatter_update(marks, indices, ops.ones_like(indices[:, 0]))
    return marks[:, :vocab] > 0


def step_bans(
    history: Tensor, step: Tensor, vocab: int, eos_id: int, min_length: int, no_repeat_ngram_size: int
) -> Tensor | None:
    """The tokens `min_length` and `no_repeat_ngram_size` ban at this step, `(N, V)` (or
    `(1, V)`) bool, for the rows whose tokens so far are the first `step` of `history`
    `(N, L)`; `None` with both off. `normalizer` applies them to the free rows only."""
    blocked = None
    if min_length:
        blocked = (ops.arange(vocab, dtype="int32") == eos_id)[None, :] & (step < min_length)  # (1, V)
    if no_repeat_ngram_size:
        repeated = repeated_ngrams(history, step, no_repeat_ngram_size, vocab)
        if repeated is not None:
            blocked = repeated if blocked is None else blocked | repeated
    return blocked


def add_prefix(carry: dict, prefix: Tensor | None, limit: Tensor) -> Tensor:
    """Puts a target prefix `(B, P)` (pad after each sentence's own) into the carry, and
    returns the per-sentence limits `(B,)` raised so that the prefix and one more token
    fit (what the search then adds is bounded by the limit as before)."""
    if prefix is None:
        return limit
    prefix = ops.cast(prefix, "int32")
    carry["prefix"] = prefix
    carry["prefix_length"] = ops.sum(ops.cast(prefix != 0, "int32"), axis=1)  # pad id 0
    return ops.maximum(limit, carry["prefix_length"] + 1)


# Sampling (`sample_tokens`): the noise is a hash of (key, step, token), integer
# arithmetic in keras.ops, so the same seed gives the same samples on every backend and
# in any batch; keras.random's generators differ per backend and carry state through
# the compiled loop.
SAMPLING_KINDS = ("full", "topk", "topp")


def _shift_right(x: Tensor, bits: int) -> Tensor:
    """Logical right shift of int32 values (keras.ops shifts signed ints arithmetically)."""
    return ops.bitwise_and(ops.right_shift(x, bits), (1 << (32 - bits)) - 1)


def _mix(x: Tensor) -> Tensor:
    """A 32-bit integer hash (Wellons's "lowbias32") on int32, wrapping."""
    x = ops.bitwise_xor(x, _shift_right(x, 16))
    x = x * 0x7FEB352D
    x = ops.bitwise_xor(x, _shift_right(x, 15))
    x = x * -0x7B935975  # 0x846ca68b as an int32
    return ops.bitwise_xor(x, _shift_right(x, 16))


UNIFORM_MAX = 1.0 - 2.0**-24  # the largest float32 below 1


def gumbel_noise(keys: Tensor, step: Tensor, vocab: int) -> Tensor:
    """`(N, V)` float32 Gumbel noise, a function of each row's key `(N,)`, the step and the token."""
    row = _mix(_mix(ops.cast(keys, "int32")) + _mix(ops.cast(step, "int32") + 0x632BE5AB))  # (N,)
    bits = _mix(row[:, None] + ops.arange(vocab, dtype="int32")[None, :] * -0x61C88647)  # golden ratio
    # (v + 0.5) / 2^24 for the top 24 bits v: in (0, 1), except that float32 rounds the top
    # value's 2^24 - 0.5 up to 2^24 (u = 1, noise +inf, and +inf - inf = NaN on a banned
    # token, which argmax picks): that one is held at the largest float32 below 1.
    uniform = (ops.cast(_shift_right(bits, 8), "float32") + 0.5) / float(1 << 24)
    uniform = ops.minimum(uniform, UNIFORM_MAX)
    return -ops.log(-ops.log(uniform))


def sample_tokens(logp: Tensor, sampling: tuple[str, float], temperature: float, keys: Tensor, step: Tensor) -> Tensor:
    """`(N,)` tokens drawn from `softmax(logp / temperature)` restricted to the `K` most
    probable tokens (`topk`) or to the fewest whose probability reaches `P` (`topp`,
    nucleus sampling, Holtzman et al. 2020), by the Gumbel-max trick with `gumbel_noise`.
    `-inf` tokens (banned, or not a row's forced token) are never drawn."""
    kind, value = sampling
    x = logp / float(temperature)
    if kind == "topk":
        kth = ops.top_k(x, min(int(value), x.shape[-1]))[0][:, -1:]  # (N, 1)
        x = ops.where(x < kth, NEG_INF, x)
    elif kind == "topp":
        ranked = ops.top_k(x, x.shape[-1])[0]  # (N, V) descending
        probs = ops.softmax(ranked, axis=-1)
        before = ops.cumsum(probs, axis=-1) - probs  # the mass of the tokens ranked above
        count = ops.sum(ops.cast(before < value, "int32"), axis=-1, keepdims=True)  # >= 1
        threshold = ops.take_along_axis(ranked, count - 1, axis=1)  # (N, 1)
        x = ops.where(x < threshold, NEG_INF, x)
    return ops.cast(ops.argmax(x + gumbel_noise(keys, step, x.shape[-1]), axis=-1), "int32")


def write_step(buffer: Tensor, values: Tensor, step: Tensor, time_axis: int) -> Tensor:
    """Write `values` at index `step` of `buffer`'s time axis (a masked select).

    `buffer` has the shape of `values` with a time axis of length `L` inserted
    at `time_axis`, e.g. `(B, L) <- (B,)` or `(B, K, L, Tx) <- (B, K, Tx)`.
    A `where` against `arange(L) == step` works with a traced `step` on
    every backend and keeps the buffer's static shape.
    """
    rank = len(buffer.shape)
    time_axis = time_axis % rank
    length = buffer.shape[time_axis]
    hit_shape = [1] * rank
    hit_shape[time_axis] = length
    hit = ops.reshape(ops.arange(length, dtype="int32") == step, hit_shape)  # (1.., L, ..1)
    return ops.where(hit, ops.expand_dims(values, time_axis), buffer)


def first_call(
    next_fn: NextFn, batch_size: int, bos_id: int, initial_states: list[Tensor] | tuple
) -> tuple[Tensor, list[Tensor], Tensor | None]:
    """Run the first step on bos for every sentence: `(B,)` tokens, `B` rows."""
    tokens = ops.full((batch_size,), bos_id, dtype="int32")  # (B,)
    states = [ops.convert_to_tensor(s) for s in initial_states]
    logits, new_states, attention = next_fn(tokens, states)
    return logits, list(new_states), attention


def check_attention(attention: Tensor | None, return_attention: bool) -> None:
    if return_attention and attention is None:
        raise ValueError(
            "return_attention=True but next_fn returned attention=None; the step "
            "callback must return a (batch, Tx) attention tensor"
        )


COMPACT_RATIO = 8  # compact once at least 1/COMPACT_RATIO of the loop's sentences are done


def shapes_may_change() -> bool:
    """Whether the searches' loop allows a carried tensor's shape to change from one
    iteration to the next: TensorFlow (`tf.while_loop` with shape invariants) and
    PyTorch (a Python loop) do, JAX's `lax.while_loop` does not."""
    return keras.backend.backend() != "jax"


def resolve_compact(compact: bool | None) -> bool:
    """`None` -> on, except on JAX; `True` on JAX is an error (see the module docstring)."""
    if compact and not shapes_may_change():
        raise ValueError("compact=True needs a loop whose shapes may change; JAX's has fixed shapes")
    return shapes_may_change() if compact is None else bool(compact)


def growing_axes(before: list[Tensor] | tuple, after: list[Tensor]) -> list[tuple[int, ...]]:
    """For each state, the axes after the batch whose static size the first call changed
    (`before`: the initial states, `after`: the first call's): those a state grows
    along. A one-line `ValueError` on JAX, whose loop keeps every shape."""
    grown = []
    for i, (old, new) in enumerate(zip(before, after)):
        if len(old.shape) != len(new.shape):
            raise ValueError(f"next_fn changed the rank of state {i}: {tuple(old.shape)} -> {tuple(new.shape)}")
        grown.append(tuple(a for a in range(1, len(old.shape)) if old.shape[a] != new.shape[a]))
    if any(grown) and not shapes_may_change():
        axes = [(i, a) for i, own in enumerate(grown) for a in own]
        raise ValueError(f"next_fn grows states (state, axis) {axes}: JAX's loop keeps every shape")
    return grown


def retire(carry: dict, store: dict) -> dict:
    """Write the results in the carry's sentences to their batch rows of `store`."""
    index = carry["sentence"][:, None]  # (A, 1)
    return {name: ops.scatter_update(value, index, carry[name]) for name, value in store.items()}


def compact_done(carry: dict, store: dict, hypotheses: int) -> tuple[dict, dict]:
    """Retire the carry's sentences and keep those not done, if enough are done.

    `hypotheses` is the number of rows per sentence in `last` and `states`.
    """

    def drop():
        kept_store = retire(carry, store)
        keep = ops.cast(ops.nonzero(ops.logical_not(carry["done"]))[0], "int32")  # (A',)
        rows = ops.arange(hypotheses, dtype="int32")[None, :] + keep[:, None] * hypotheses
        rows = ops.reshape(rows, (-1,))  # (A' * hypotheses,)
        kept = {}
        for name, value in carry.items():
            if name == "step":
                kept[name] = value
            elif name == "states":
                kept[name] = [ops.take(s, rows, axis=0) for s in value]
            else:
                kept[name] = ops.take(value, rows if name == "last" else keep, axis=0)
        return kept, kept_store

    done = ops.sum(ops.cast(carry["done"], "int32"))
    count = ops.shape(carry["done"])[0]
    due = (done > 0) & (done < count) & (done * COMPACT_RATIO >= count)
    return ops.cond(due, drop, lambda: (carry, store))


def while_loop(
    cond, body, carry: dict, store: dict, varying: bool, grown: list[tuple[int, ...]] | None = None
) -> tuple[dict, dict]:
    """`ops.while_loop` over `(carry, store)` (see `results_store`); with `varying`, the carry's batch
    dimension may change between iterations, and `carry["states"][i]` may change along
    the axes `grown[i]` (`growing_axes`) (TensorFlow: shape invariants; PyTorch: always;
    never with JAX, see `resolve_compact`)."""
    grown = grown or []
    if (varying or any(grown)) and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        def relax(x, axes=()):
            dims = list(x.shape)
            for axis in ((0,) if varying and dims else ()) + tuple(axes):
                dims[axis] = None
            return tf.TensorShape(dims)

        relaxed = {
            name: [relax(s, axes) for s, axes in zip(value, grown + [()] * len(value))]
            if name == "states"
            else tf.nest.map_structure(relax, value)
            for name, value in carry.items()
        }
        fixed = tf.nest.map_structure(lambda x: x.shape, store)
        return tf.while_loop(cond, body, (carry, store), shape_invariants=(relaxed, fixed))
    return ops.while_loop(cond, body, (carry, store))


def results_store(carry: dict, names: tuple[str, ...], compact: bool) -> dict:
    """The `(B, ·)` store of the results `names` in the carry; empty without compaction,
    where the carry keeps every sentence and is the result itself."""
    return {name: carry[name] for name in names if name in carry} if compact else {}


def finish(carry: dict, store: dict, names: tuple[str, ...]) -> dict:
    """The `(B, ·)` results `names` after the loop."""
    return retire(carry, store) if store else {name: carry[name] for name in names if name in carry}
