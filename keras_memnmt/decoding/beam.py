"""Beam search with separate alive and finished sets (see `common` for `next_fn`).

Finished hypotheses are frozen and set aside in a finished buffer instead of
competing in the live beam, as in tensor2tensor's `beam_search.py` and Flax
`examples/wmt/decode.py`; which candidates may finish, and when a sentence
stops, follow fairseq's `SequenceGenerator`, so that `beam_size=1` is greedy
search exactly. See `beam_search` for the steps.
"""

from __future__ import annotations

from keras import ops

from keras_memnmt.decoding.common import (
    NEG_INF,
    NextFn,
    Tensor,
    add_prefix,
    check_attention,
    check_beam,
    check_search_limits,
    compact_done,
    finish,
    first_call,
    forced_tokens,
    growing_axes,
    log_probs,
    normalizer,
    resolve_compact,
    resolve_max_length,
    results_store,
    step_bans,
    while_loop,
    write_step,
)
from keras_memnmt.decoding.common import length_penalty as _length_penalty


def _gather(x: Tensor, index: Tensor) -> Tensor:
    """`x (B, N, ...)`, `index (B, M)` in `[0, N)` -> `(B, M, ...)`; `B` may be dynamic."""
    n, m = x.shape[1], index.shape[1]
    rows = ops.arange(ops.shape(index)[0], dtype="int32")[:, None] * n + ops.cast(index, "int32")
    flat = ops.reshape(x, (-1, *x.shape[2:]))  # (B*N, ...)
    taken = ops.take(flat, ops.reshape(rows, (-1,)), axis=0)  # (B*M, ...)
    return ops.reshape(taken, (-1, m, *x.shape[2:]))  # (B, M, ...)


def block_size(vocab: int, count: int) -> int | None:
    """The width of the vocabulary blocks of :func:`candidates`, or ``None`` for one pass.

    A divisor of ``V`` near ``sqrt(8 V)`` (250 for 8,000 pieces), so that the block
    maxima and the gathered blocks are both small; ``None`` where blocks would not pay
    (a small vocabulary) or where no divisor of ``V`` fits, whose few shapes keep the
    single ``top_k``.
    """
    if vocab < 1024 or count > 64:
        return None
    target = int((8 * vocab) ** 0.5)
    sizes = [d for d in range(max(count, 64), min(vocab // 4, 4 * target) + 1) if vocab % d == 0]
    return min(sizes, key=lambda d: abs(d - target)) if sizes else None


def candidates(
    logits: Tensor,
    alive_raw: Tensor,
    count: int,
    banned_ids: tuple[int, ...],
    forced: Tensor | None = None,
    blocked: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The ``count`` best continuations of each sentence's beams: step 2a-b of `beam_search`.

    `logits (A*K, V)`, `alive_raw (A, K)` -> `(raw (A, C), index (A, C))`: the `C = count`
    largest of `alive_raw[a, k] + log p[a*K + k, v]` (`log_probs`, banned ids `-inf`) over
    the `K*V` candidates of sentence `a`, best first, with their flat indices `k*V + v`;
    exactly what `top_k` over the `(A, K*V)` candidate scores returns, equal scores
    included (lower index first).

    Why not that one `top_k`: on a CPU, TensorFlow's `top_k` over `(64, 40000)` took
    longer than the log-softmax and the candidate sums together. Here the vocabulary of
    each beam is cut into blocks of `W` (`block_size`). A candidate's score grows with
    its logit within a beam's row, so the block's largest logit gives the block's best
    score; the `C` best blocks of a sentence (lower block first among equals) hold its `C`
    best candidates (a candidate of another block has `C` blocks ahead of it, each with
    a candidate at least as good and, if equal, of lower index); they are gathered in
    index order and one `top_k` over their `C*W` scores picks the `C` best. What still
    reads every logit: the row's maximum and sum of exponentials (the normalizer), the
    banning of pad and bos, and the block maxima. `forced` `(A*K,)`: a row's only
    allowed token, or `-1`; `blocked` `(A*K, V)` or `(1, V)`: tokens banned in a free
    row (`common.normalizer`).
    """
    k, vocab = alive_raw.shape[1], logits.shape[-1]
    width = block_size(vocab, count)
    if width is None:
        cand = alive_raw[:, :, None] + ops.reshape(log_probs(logits, banned_ids, forced, blocked), (-1, k, vocab))
        raw, index = ops.top_k(ops.reshape(cand, (-1, k * vocab)), count)  # (A, C)
        return raw, ops.cast(index, "int32")
    blocks = vocab // width
    x, top, log_sum = normalizer(logits, banned_ids, forced, blocked)  # (A*K, V), (A*K, 1), (A*K, 1)
    offset = ops.reshape(alive_raw, (-1, 1))  # (A*K, 1)

    def score(values, offset, top, log_sum):  # alive_raw + log p, in log_probs' own steps
        return offset + ((values - top) - log_sum)

    block_best = score(ops.max(ops.reshape(x, (-1, blocks, width)), axis=-1), offset, top, log_sum)
    _, best = ops.top_k(ops.reshape(block_best, (-1, k * blocks)), count)  # (A, C) in [0, K*blocks)
    best = ops.sort(ops.cast(best, "int32"), axis=-1)  # index order
    rows = ops.arange(ops.shape(best)[0], dtype="int32")[:, None] * k + best // blocks  # (A, C) in [0, A*K)

    def per_row(t):  # (A*K, 1) -> (A, C, 1), each gathered block's row
        return ops.take(t, rows, axis=0)

    values = _gather(ops.reshape(x, (-1, k * blocks, width)), best)  # (A, C, W)
    values = score(values, per_row(offset), per_row(top), per_row(log_sum))
    raw, pick = ops.top_k(ops.reshape(values, (-1, count * width)), count)  # (A, C)
    pick = ops.cast(pick, "int32")
    block = ops.take_along_axis(best, pick // width, axis=1)  # (A, C) in [0, K*blocks)
    return raw, block * width + pick % width  # k*V + v: the blocks tile each beam's row


def beam_search(
    next_fn: NextFn,
    initial_states: list[Tensor] | tuple,
    batch_size: int,
    beam_size: int,
    max_length: int | Tensor,
    bos_id: int = 2,
    eos_id: int = 3,
    pad_id: int = 0,
    length_penalty: str = "gnmt",
    alpha: float = 0.6,
    n_best: int = 1,
    return_attention: bool = False,
    early_stopping: bool = True,
    max_steps: int | None = None,
    compact: bool | None = None,
    prefix: Tensor | None = None,
    min_length: int = 0,
    no_repeat_ngram_size: int = 0,
) -> dict[str, Tensor]:
    """Beam search with an alive beam and a finished buffer, as one compiled loop.

    Notation: `B` batch, `K` beam size, `V` vocabulary, `C = min(2K, K V)`
    candidates per sentence and step, `L` buffer width (`max_steps`), `Tx`
    source length. Scores: `raw = log P(Y)` (sum of token log-probs, eos
    included) and `score = raw / lp(|Y|)` (see `common.length_penalty`).

    1. Call `next_fn(bos (B,), initial_states)` once on `B` rows, then
       repeat its logits, states and attention `K` times along axis 0
       (`(B, ·) -> (B*K, ·)`, row `b*K + k`). The alive log-probs start at
       `[0, -inf, ..., -inf]` `(B, K)`, so only beam 0 is expanded first.
    2. Each step `i` (inside `keras.ops.while_loop` from the second on,
       where `next_fn` is called on the alive beams' last tokens `(B*K,)`):
       a. `log p = log_softmax(logits)` `(B*K, V)`, pad and bos set to
          `-inf`; at a sentence's last allowed position (`i + 1` reaches its
          limit) every token but eos too; elsewhere eos while `i < min_length`,
          and each token that would repeat an n-gram of `no_repeat_ngram_size`
          in its beam's own tokens (`common.step_bans`);
          `cand = alive_raw[:, :, None] + log p` reshaped to `(B, K*V)`.
       b. `top_k(cand, C)` gives each candidate's raw score, source beam
          `index // V` and token `index % V` `(B, C)`; its sequence is the
          source beam's `(B, C, L)` with the token written at column `i`.
       c. A candidate is *final* if its token is eos (at its sentence's
          limit, every live candidate is).
       d. Alive: the best `K` non-final candidates `(B, K)`; the states
          `(B*K, ·)` follow their source beams via `ops.take` on axis 0,
          except a state `next_fn` returns as the very tensor it was given
          (pass-through encoder memory): it started as `K` equal copies per
          sentence and stays so, and moving rows within a sentence would
          copy it unchanged.
       e. Finished: a final candidate among the `K` best of this step (the
          beam proper; fairseq's rule) is frozen with
          `score = raw / lp(i + 1)`; the finished buffer `(B, K)` keeps the
          `K` best scores of old and new, sorted. The buffer of a done
          sentence (f.) no longer changes.
       f. A sentence is done when (i) its limit is reached or no alive
          hypothesis is left; or (ii) its `n_best`-th finished score beats
          the best any alive hypothesis could still reach,
          `max(alive_raw) / lp(limit)` (log-probs only decrease, and for
          `raw <= 0` the largest divisor gives the largest score, so
          stopping here never changes the `n_best` returned); or (iii),
          with `early_stopping`, `K` hypotheses have finished.
       g. With `compact`, once at least 1/8 of the sentences in the loop are
          done (and not all), their finished buffers go to the results and
          their rows leave the loop (see "Compaction" in `common`).
    3. The loop ends after `L` steps or once every sentence is done; the
       first `n_best` entries of the finished buffer are returned (empty
       entries, possible only with a tiny vocabulary or many bans, have score `-inf`,
       length 0 and pad tokens).

    Every reduction is per sentence and a done sentence is frozen, so a
    sentence's result does not depend on the rest of the batch.

    Stopping decision: with `early_stopping=True` (default, fairseq) rule
    (iii) applies, and `beam_size=1` equals greedy search exactly: the
    only candidate that may finish is the best one, and the first finish
    fills the buffer. With `early_stopping=False` the search runs until the
    bound (ii) holds (tensor2tensor / Flax), which can only improve the
    returned scores, but `beam_size=1` may then differ from greedy (with a
    length penalty an alive hypothesis may outscore greedy's finished one
    once it is longer).

    Example (a model whose `next_fn` ignores its states):

    >>> import numpy as np
    >>> table = np.log(np.full((5, 5), 0.2, "float32"))  # uniform over 5 tokens
    >>> def next_fn(tokens, states):
    ...     return ops.take(table, tokens, axis=0), states, None
    >>> out = beam_search(next_fn, [np.zeros((2, 1), "float32")], batch_size=2,
    ...                   beam_size=3, max_length=4, n_best=2)
    >>> tuple(out["tokens"].shape), tuple(out["scores"].shape)
    ((2, 2, 4), (2, 2))

    Args:
        next_fn: the step callback, see `keras_memnmt.decoding.common`.
        initial_states: list of `(B, ...)` tensors (batch first, any rank after it),
            the decoder's states at bos.
        batch_size: `B` (a Python int).
        beam_size: `K >= 1`.
        max_length: Python int, or a `(B,)` int tensor of per-sentence
            limits (e.g. `a * source_length + b`), eos included: a hypothesis
            takes eos at its sentence's limit.
        bos_id: the token fed at the first step.
        eos_id: the token that ends a hypothesis (kept in the output).
        pad_id: written after eos; never generated (nor is bos).
        length_penalty: `"gnmt"`, `"average"` or `"none"`.
        alpha: the GNMT exponent.
        n_best: hypotheses returned per sentence, `1 <= n_best <= K`.
        return_attention: also return each hypothesis' attention.
        early_stopping: stop a sentence once `K` hypotheses have finished.
        max_steps: static width `L` of the outputs; required only when
            `max_length` is a traced tensor (see `resolve_max_length`).
        compact: drop done sentences from the loop (step 2g); the results are
            the same either way. Default: on, except on JAX, where it is an
            error (see `common`).
        prefix: `(B, P)` int32 target tokens each sentence's hypotheses start
            with (pad after a shorter one): inside it every other candidate is
            `-inf`, so one beam carries the prefix and the beam opens after it,
            as at the first step; the limit is raised to fit it and one token more.
        min_length: eos is `-inf` while a hypothesis has fewer tokens (the
            prefix included); the limit still ends it with eos.
        no_repeat_ngram_size: `n >= 1` bans a token that would complete an
            n-gram of `n` tokens already in the hypothesis (the prefix
            included); 0: off.

    Returns:
        dict with
        `tokens` `(B, n_best, L)` int32 — eos included, pad after it;
        `scores` `(B, n_best)` float32 — length-normalized, best first;
        `raw_scores` `(B, n_best)` float32 — `log P(Y)`;
        `lengths` `(B, n_best)` int32 — tokens up to and including eos;
        `attention` `(B, n_best, L, Tx)` float32, if `return_attention`.
    """
    check_beam(bos_id, eos_id, pad_id, length_penalty, beam_size, n_best)
    check_search_limits(min_length, no_repeat_ngram_size)
    penalty_kind = length_penalty  # the argument shadows the function of that name

    def lp(lengths):
        return _length_penalty(lengths, penalty_kind, alpha)

    compact = resolve_compact(compact)
    steps, limit = resolve_max_length(max_length, batch_size, max_steps)  # L, (B,)
    b, k = batch_size, beam_size
    banned = (pad_id, bos_id)

    # 1. First call on B rows, then K copies of each.
    logits, states, attention = first_call(next_fn, b, bos_id, initial_states)
    grown = growing_axes(initial_states, states)  # axes a state grows along
    check_attention(attention, return_attention)
    vocab = logits.shape[-1]
    c = min(2 * k, k * vocab)
    logits = ops.repeat(logits, k, axis=0)  # (B*K, V)
    states = [ops.repeat(s, k, axis=0) for s in states]  # (B*K, ·)
    first_alive = ops.where(ops.arange(k) == 0, 0.0, NEG_INF)  # (K,)
    # Leading dimension: B*K rows for `last` and `states`, B sentences for the rest
    # (A*K and A once compaction has dropped done sentences).
    carry = {
        "step": ops.convert_to_tensor(0, dtype="int32"),
        "last": ops.full((b * k,), bos_id, dtype="int32"),  # (B*K,)
        "states": states,
        "sentence": ops.arange(b, dtype="int32"),  # (B,) each sentence's batch row
        "limit": limit,  # (B,)
        "max_lp": lp(limit),  # (B,)
        "alive_tokens": ops.full((b, k, steps), pad_id, dtype="int32"),  # (B, K, L)
        "alive_raw": ops.cast(ops.tile(first_alive[None, :], (b, 1)), "float32"),  # (B, K)
        "fin_tokens": ops.full((b, k, steps), pad_id, dtype="int32"),  # (B, K, L)
        "fin_scores": ops.full((b, k), NEG_INF, dtype="float32"),  # (B, K)
        "fin_raw": ops.full((b, k), NEG_INF, dtype="float32"),  # (B, K)
        "fin_lengths": ops.zeros((b, k), dtype="int32"),  # (B, K)
        "done": ops.zeros((b,), dtype="bool"),  # (B,)
    }
    carry["limit"] = ops.minimum(add_prefix(carry, prefix, limit), steps)
    carry["max_lp"] = lp(carry["limit"])
    if return_attention:
        attention = ops.repeat(ops.cast(attention, "float32"), k, axis=0)  # (B*K, Tx)
        tx = attention.shape[-1]
        carry["alive_attention"] = ops.zeros((b, k, steps, tx), dtype="float32")
        carry["fin_attention"] = ops.zeros((b, k, steps, tx), dtype="float32")

    def expand(carry, logits, new_states, attention):
        # 2. One step for every sentence of the carry (A of them below; A = B
        # without compaction).
        step, done, limit = carry["step"], carry["done"], carry["limit"]
        length = step + 1
        # a-b. The C best candidates (`candidates`), their source beams, tokens and sequences.
        forced = ops.repeat(forced_tokens(carry, eos_id), k, axis=0)  # (A*K,)
        history = ops.reshape(carry["alive_tokens"], (-1, steps))  # (A*K, L) each beam's tokens so far
        blocked = step_bans(history, step, vocab, eos_id, min_length, no_repeat_ngram_size)
        cand_raw, cand_index = candidates(logits, carry["alive_raw"], c, banned, forced, blocked)  # (A, C)
        cand_beam = cand_index // vocab  # (A, C)
        cand_token = cand_index % vocab  # (A, C)
        cand_tokens = _gather(carry["alive_tokens"], cand_beam)  # (A, C, L)
        cand_tokens = write_step(cand_tokens, cand_token, step, time_axis=-1)
        if return_attention:
            step_attention = ops.reshape(ops.cast(attention, "float32"), (-1, k, tx))  # (A, K, Tx)
            cand_attention = _gather(carry["alive_attention"], cand_beam)  # (A, C, L, Tx)
            cand_attention = write_step(cand_attention, _gather(step_attention, cand_beam), step, time_axis=2)
        # c. Final candidates: eos, or the sentence's limit reached (where eos is the only
        # live token, 2a, unless a prefix fills the buffer).
        final = (cand_token == eos_id) | (length >= limit)[:, None]  # (A, C)
        valid = cand_raw > NEG_INF
        # d. Alive: the K best non-final candidates; states follow their beams.
        alive_raw, keep = ops.top_k(ops.where(final, NEG_INF, cand_raw), k)  # (A, K)
        keep = ops.cast(keep, "int32")
        source = ops.take_along_axis(cand_beam, keep, axis=1)  # (A, K)
        rows = ops.arange(ops.shape(source)[0], dtype="int32")[:, None] * k + source
        rows = ops.reshape(rows, (-1,))  # (A*K,)
        new = {
            **carry,  # sentence, limit, max_lp
            "step": length,
            "last": ops.reshape(ops.take_along_axis(cand_token, keep, axis=1), (-1,)),
            # States that next_fn passed through untouched (the encoder memory, about
            # 30 MB at B*K = 320 rows) equal across a sentence's beams: left in place.
            "states": [
                s if s is old else ops.take(s, rows, axis=0) for s, old in zip(new_states, carry["states"], strict=True)
            ],  # (A*K, ·)
            "alive_tokens": _gather(cand_tokens, keep),  # (A, K, L)
            "alive_raw": alive_raw,
        }
        if return_attention:
            new["alive_attention"] = _gather(cand_attention, keep)  # (A, K, L, Tx)
        # e. Finished: final candidates within the K best, merged into the buffer.
        rank = ops.arange(c, dtype="int32")[None, :]  # (1, C)
        finishing = final & valid & (rank < k) & ops.logical_not(done)[:, None]  # (A, C)
        new_scores = ops.where(finishing, cand_raw / lp(length), NEG_INF)  # (A, C)
        fin_scores, pick = ops.top_k(
            ops.concatenate([carry["fin_scores"], new_scores], axis=1), k
        )  # (A, K), indices into the K + C merged entries
        pick = ops.cast(pick, "int32")

        def merge(old, new_entries):
            return _gather(ops.concatenate([old, new_entries], axis=1), pick)

        new["fin_scores"] = fin_scores
        new["fin_raw"] = merge(carry["fin_raw"], ops.where(finishing, cand_raw, NEG_INF))
        new["fin_lengths"] = merge(carry["fin_lengths"], ops.zeros_like(cand_token) + length)
        new["fin_tokens"] = merge(carry["fin_tokens"], cand_tokens)
        if return_attention:
            new["fin_attention"] = merge(carry["fin_attention"], cand_attention)
        # f. Which sentences are done.
        best_alive = alive_raw[:, 0]  # (A,)
        nth = fin_scores[:, n_best - 1]  # (A,)
        stop = (length >= limit) | (best_alive == NEG_INF)
        stop = stop | ((nth > NEG_INF) & (nth > best_alive / carry["max_lp"]))
        if early_stopping:
            stop = stop | (ops.sum(ops.cast(fin_scores > NEG_INF, "int32"), axis=1) >= k)
        new["done"] = done | stop
        return new

    carry = expand(carry, logits, states, attention)
    finished = ("fin_tokens", "fin_scores", "fin_raw", "fin_lengths", "fin_attention")
    store = results_store(carry, finished, compact)

    # 3. The remaining steps as one compiled loop.
    def cond(carry, store):
        return (carry["step"] < steps) & ops.logical_not(ops.all(carry["done"]))

    def body(carry, store):
        logits, new_states, attention = next_fn(carry["last"], carry["states"])
        carry = expand(carry, logits, new_states, attention)
        return compact_done(carry, store, k) if compact else (carry, store)  # g.

    store = finish(*while_loop(cond, body, carry, store, varying=compact, grown=grown), finished)
    return n_best_outputs(store, n_best, pad_id)


def n_best_outputs(finished: dict, n_best: int, pad_id: int) -> dict[str, Tensor]:
    """The returned dict from the `(B, K, ...)` finished buffers (`fin_tokens`,
    `fin_scores`, `fin_raw`, `fin_lengths`, `fin_attention` if kept): the first `n_best`,
    with pad tokens, length 0 and zero attention where none finished."""
    found = finished["fin_scores"][:, :n_best] > NEG_INF  # (B, n_best)
    outputs = {
        "tokens": ops.where(found[:, :, None], finished["fin_tokens"][:, :n_best], pad_id),
        "scores": finished["fin_scores"][:, :n_best],
        "raw_scores": finished["fin_raw"][:, :n_best],
        "lengths": ops.where(found, finished["fin_lengths"][:, :n_best], 0),
    }
    if "fin_attention" in finished:
        outputs["attention"] = ops.where(found[:, :, None, None], finished["fin_attention"][:, :n_best], 0.0)
    return outputs
