"""Greedy search over any decoder's single step (see `common` for `next_fn`)."""

from __future__ import annotations

from keras import ops

from keras_memnmt.decoding.common import (
    NextFn,
    Tensor,
    add_prefix,
    check_attention,
    check_ids,
    check_search_limits,
    compact_done,
    finish,
    first_call,
    forced_tokens,
    growing_axes,
    log_probs,
    resolve_compact,
    resolve_max_length,
    results_store,
    sample_tokens,
    step_bans,
    while_loop,
    write_step,
)


def greedy_search(
    next_fn: NextFn,
    initial_states: list[Tensor] | tuple,
    batch_size: int,
    max_length: int | Tensor,
    bos_id: int = 2,
    eos_id: int = 3,
    pad_id: int = 0,
    return_attention: bool = False,
    max_steps: int | None = None,
    compact: bool | None = None,
    prefix: Tensor | None = None,
    sampling: tuple[str, float] | None = None,
    temperature: float = 1.0,
    keys: Tensor | None = None,
    min_length: int = 0,
    no_repeat_ngram_size: int = 0,
) -> dict[str, Tensor]:
    """Pick the most probable token at every step (or draw one), as one compiled loop.

    Notation: `B` batch, `V` vocabulary, `L` buffer width (`max_steps`),
    `Tx` source length.

    1. Call `next_fn(bos (B,), initial_states)` once outside the loop; this
       fixes the shapes of the states, of the logits `(B, V)` and of the
       attention `(B, Tx)`, which the loop buffers need.
    2. Each step `i` (the first one on the result of 1., the others inside
       `keras.ops.while_loop`, which calls `next_fn` on the token just
       chosen):
       a. `log p = log_softmax(logits)` `(B, V)`; pad and bos get `-inf`.
          Inside a sentence's target `prefix`, every token but the prefix's
          gets `-inf` too, and so does every token but eos at the sentence's
          last allowed position (`i + 1` reaches its limit); elsewhere eos
          while `i < min_length`, and each token that would repeat an n-gram
          of `no_repeat_ngram_size` (`common.step_bans`). The log-probabilities
          stay the model's.
       b. The token is the `top_k(score[:, None] + log p, 1)` `(B,)`,
          i.e. the argmax of `log p`, and its value the new score: the same
          ops as beam search with `K = 1`, so the two pick the same tokens
          (ties included) and the same scores (bitwise on TensorFlow and
          PyTorch; XLA may compile the model's own arithmetic differently
          in the two loops, a few ulp). With `sampling`, the token is drawn
          (`common.sample_tokens`, row `b`'s noise from `keys[b]`) and the
          score adds its log-probability under the model (no temperature).
       c. A sentence finishes on eos (at its limit at the latest, 2a); its
          length becomes `i + 1`.
       d. The token is written at column `i` of the `(B, L)` token buffer
          (pad for sentences that finished earlier), the attention at
          `[:, i]` of the `(B, L, Tx)` buffer (zeros once finished).
       e. With `compact`, once at least 1/8 of the sentences in the loop
          have finished (and not all), their results are set aside and their
          rows leave the loop (see "Compaction" in `common`).
    3. The loop ends after `L` steps or once every sentence has finished.

    Example (a model whose `next_fn` ignores its states):

    >>> import numpy as np
    >>> table = np.log(np.full((5, 5), 0.2, "float32"))  # uniform over 5 tokens
    >>> table[:, 3] = 0.0  # eos is the most likely token everywhere
    >>> def next_fn(tokens, states):
    ...     return ops.take(table, tokens, axis=0), states, None
    >>> out = greedy_search(next_fn, [np.zeros((2, 1), "float32")], batch_size=2, max_length=4)
    >>> ops.convert_to_numpy(out["tokens"]).tolist(), ops.convert_to_numpy(out["lengths"]).tolist()
    ([[3, 0, 0, 0], [3, 0, 0, 0]], [1, 1])

    Args:
        next_fn: the step callback, see `keras_memnmt.decoding.common`.
        initial_states: list of `(B, ...)` tensors (batch first, any rank after it),
            the decoder's states at bos.
        batch_size: `B` (a Python int).
        max_length: Python int, or a `(B,)` int tensor of per-sentence
            limits (e.g. `a * source_length + b`).
        bos_id: the token fed at the first step.
        eos_id: the token that ends a sentence (kept in the output).
        pad_id: written after eos; never generated (nor is bos).
        return_attention: also return the attention of every step.
        max_steps: static width `L` of the outputs; required only when
            `max_length` is a traced tensor (see `resolve_max_length`).
        compact: drop finished sentences from the loop (step 2e); the
            results are the same either way. Default: on, except on JAX, where
            it is an error (see `common`).
        prefix: `(B, P)` int32 target tokens each sentence must start with (pad
            after a shorter one); its limit is raised to fit the prefix and one
            token more (`common.add_prefix`). `L` must hold it.
        sampling: `("full" | "topk" | "topp", value)` (`common.parse_sampling`):
            draw each token instead of taking the best.
        temperature: divides the log-probabilities that `sampling` draws from.
        keys: `(B,)` int32, each row's sampling key (the same key, the same
            draws on every backend); required with `sampling`.
        min_length: eos is `-inf` while a sentence has fewer tokens (its
            prefix included); its limit still ends it with eos.
        no_repeat_ngram_size: `n >= 1` bans a token that would complete an
            n-gram of `n` tokens already in the sentence (its prefix included);
            0: off.

    Returns:
        dict with
        `tokens` `(B, L)` int32 — eos included, pad after it;
        `scores` `(B,)` float32 — sum of the chosen tokens' log-probs, eos's included;
        `lengths` `(B,)` int32 — tokens up to and including eos;
        `attention` `(B, L, Tx)` float32, if `return_attention`.
    """
    check_ids(bos_id, eos_id, pad_id)
    check_search_limits(min_length, no_repeat_ngram_size)
    if sampling is not None and keys is None:
        raise ValueError("sampling needs keys: one int32 key per sentence")
    compact = resolve_compact(compact)
    steps, limit = resolve_max_length(max_length, batch_size, max_steps)  # L, (B,)
    banned = (pad_id, bos_id)

    # 1. The first call fixes the shapes.
    logits, states, attention = first_call(next_fn, batch_size, bos_id, initial_states)
    grown = growing_axes(initial_states, states)  # axes a state grows along
    check_attention(attention, return_attention)
    carry = {
        "step": ops.convert_to_tensor(0, dtype="int32"),
        "last": ops.full((batch_size,), bos_id, dtype="int32"),  # (B,)
        "states": states,
        "sentence": ops.arange(batch_size, dtype="int32"),  # (B,) each sentence's batch row
        "limit": limit,  # (B,)
        "tokens": ops.full((batch_size, steps), pad_id, dtype="int32"),  # (B, L)
        "scores": ops.zeros((batch_size,), dtype="float32"),  # (B,)
        "lengths": ops.zeros((batch_size,), dtype="int32"),  # (B,)
        "done": ops.zeros((batch_size,), dtype="bool"),  # (B,)
    }
    carry["limit"] = ops.minimum(add_prefix(carry, prefix, limit), steps)
    if sampling is not None:
        carry["keys"] = ops.cast(keys, "int32")  # (B,)
    if return_attention:
        tx = attention.shape[-1]
        carry["attention"] = ops.zeros((batch_size, steps, tx), dtype="float32")  # (B, L, Tx)

    def select(carry, logits, new_states, attention):
        # 2. One step: choose, score, finish, write (B rows below; fewer once
        # compaction has dropped finished sentences).
        step, done, limit = carry["step"], carry["done"], carry["limit"]
        blocked = step_bans(
            carry["tokens"], step, logits.shape[-1], eos_id, min_length, no_repeat_ngram_size
        )  # (B, V), (1, V) or None
        logp = log_probs(logits, banned, forced_tokens(carry, eos_id), blocked)  # (B, V)
        if sampling is None:
            cand = carry["scores"][:, None] + logp  # (B, V), as beam search ranks them
            top_score, top_token = ops.top_k(cand, 1)  # (B, 1) each
            top_score = ops.reshape(top_score, (-1,))  # (B,)
            top_token = ops.reshape(ops.cast(top_token, "int32"), (-1,))  # (B,)
        else:
            top_token = sample_tokens(logp, sampling, temperature, carry["keys"], step)  # (B,)
            top_score = carry["scores"] + ops.take_along_axis(logp, top_token[:, None], axis=1)[:, 0]
        active = ops.logical_not(done)
        token = ops.where(active, top_token, pad_id)
        scores = ops.where(active, top_score, carry["scores"])
        finishing = active & ((token == eos_id) | (step + 1 >= limit))
        new = {
            **carry,  # sentence, limit
            "step": step + 1,
            "last": token,
            "states": list(new_states),
            "tokens": write_step(carry["tokens"], token, step, time_axis=-1),
            "scores": scores,
            "lengths": ops.where(finishing, step + 1, carry["lengths"]),
            "done": done | finishing,
        }
        if return_attention:
            attention = ops.cast(attention, "float32")  # (B, Tx)
            attention = ops.where(active[:, None], attention, 0.0)
            new["attention"] = write_step(carry["attention"], attention, step, time_axis=1)
        return new

    carry = select(carry, logits, states, attention)

    results = ("tokens", "scores", "lengths", "attention")
    store = results_store(carry, results, compact)

    # 3. The remaining steps as one compiled loop.
    def cond(carry, store):
        return (carry["step"] < steps) & ops.logical_not(ops.all(carry["done"]))

    def body(carry, store):
        logits, new_states, attention = next_fn(carry["last"], carry["states"])
        carry = select(carry, logits, new_states, attention)
        return compact_done(carry, store, 1) if compact else (carry, store)  # e.

    return finish(*while_loop(cond, body, carry, store, varying=compact, grown=grown), results)
