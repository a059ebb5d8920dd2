"""Lexically constrained beam search: dynamic beam allocation (Post & Vilar 2018).

Every hypothesis tracks which tokens of its sentence's constraints it has produced
(Hokamp & Liu 2017's grid, kept as state): a phrase is met once its tokens appear in
order and without a gap; a phrase that is started and then broken off counts as not
started again. A hypothesis may end (eos) only when it has met every constraint.

Each step, the candidates of a sentence are (1) the `C = 2K` best continuations over
all beams (as in `beam.beam_search`), (2) for each beam, every constraint token it may
take next (the next token of the phrase it is inside, or the first token of each phrase
it has not started), and (3) each beam's own best continuation. The `K` beam slots
are divided into banks by the number of constraint tokens met, `0 .. T`: `K // (T+1)`
slots each, the remainder to bank `T`; a bank with fewer candidates than slots passes
the rest to the bank below (from `T` down, Sockeye's `get_bank_sizes`), and each bank
takes its best candidates by score. So hypotheses that have met more constraints keep
a place in the beam although their scores are lower.

Why our own and not a library's: keras-hub's samplers have no constraints; fairseq's
implementation is Python over PyTorch tensors per hypothesis. This one is keras.ops in
one compiled loop, like the unconstrained searches, over any model's step callback
(`common`), ensembles included.

Decisions (Post & Vilar leave these to the implementation):

* A constraint token counts as met while its phrase is in progress (the bank of a
  hypothesis halfway through a phrase is above one that has not started it), as in
  Sockeye; breaking the phrase off unmeets its tokens.
* Phrases are unordered; where a token starts several unmet phrases, the first in the
  line's order is the one started.
* The per-sentence length limit is raised by the sentence's constraint tokens `T`. A
  hypothesis takes eos at the limit (`common`'s length decision) whether or not it has
  met every constraint (so every sentence gets an output), but ranks below every
  hypothesis that has: the finished buffer is ordered by `score - 10^4 * unmet tokens`,
  and the scores returned are the plain scores.
* No compaction (finished sentences stay in the loop, `common`): the constrained search
  is the occasional mode; the unconstrained searches keep their speed.
"""

from __future__ import annotations

from keras import ops

from keras_memnmt.decoding.beam import _gather, n_best_outputs
from keras_memnmt.decoding.common import (
    NEG_INF,
    NextFn,
    Tensor,
    add_prefix,
    check_attention,
    check_beam,
    check_search_limits,
    first_call,
    forced_tokens,
    growing_axes,
    log_probs,
    resolve_max_length,
    step_bans,
    while_loop,
    write_step,
)
from keras_memnmt.decoding.common import length_penalty as _length_penalty

UNMET_PENALTY = 1e4  # per unmet constraint token, in the finished buffer's order only
SEPARATOR = -1  # between two phrases in a row of `constraints`


def constraint_tables(constraints: Tensor) -> dict[str, Tensor]:
    """`(B, M)` int32 rows of phrases (token ids, phrases separated by `SEPARATOR`, pad 0
    after the last) -> the per-position tables the search reads, each `(B, M)`:
    `token` (the id, 0 off a phrase), `valid`, `first` (a phrase's first token), `last`
    (its last), `phrase` (its number in the row), and `total` `(B,)` (tokens to meet)."""
    ids = ops.cast(constraints, "int32")  # (B, M)
    valid = ids > 0
    before = ops.pad(ids, ((0, 0), (1, 0)), constant_values=SEPARATOR)[:, :-1]  # (B, M) the previous entry
    after = ops.pad(ids, ((0, 0), (0, 1)), constant_values=0)[:, 1:]  # (B, M) the next entry
    first = valid & (before <= 0)
    return {
        "token": ops.where(valid, ids, 0),
        "valid": valid,
        "first": first,
        "last": valid & (after <= 0),
        "phrase": ops.cumsum(ops.cast(first, "int32"), axis=1),
        "total": ops.sum(ops.cast(valid, "int32"), axis=1),
    }


def advance(tables: dict, met: Tensor, current: Tensor, token: Tensor) -> tuple[Tensor, Tensor]:
    """The constraint state after each candidate's token.

    `met (A, N, M)` bool: constraint positions met; `current (A, N)` int32: the position
    of the next token of the phrase in progress, `-1` outside one; `token (A, N)`.
    `tables` as `constraint_tables` gives them, `(A, M)`. Returns the new `met` and
    `current`.
    """
    m = met.shape[-1]
    position = ops.arange(m, dtype="int32")[None, None, :]  # (1, 1, M)

    def at(name, index):  # tables[name] (A, M) at index (A, N) -> (A, N)
        return ops.take_along_axis(tables[name], ops.maximum(index, 0), axis=1)

    inside = current >= 0
    extend = inside & (token == at("token", current))  # the phrase in progress goes on
    broken = inside & ops.logical_not(extend)  # ... or is broken off: its tokens are unmet
    in_phrase = tables["phrase"][:, None, :] == at("phrase", current)[..., None]  # (A, N, M)
    met = met & ops.logical_not(broken[..., None] & in_phrase)
    met = met | (extend[..., None] & (position == current[..., None]))
    current = ops.where(extend, ops.where(at("last", current), -1, current + 1), -1)
    # Otherwise the token may start a phrase not yet started (the first such in the row).
    starts = (
        ops.logical_not(extend)[..., None]
        & tables["first"][:, None, :]
        & (tables["token"][:, None, :] == token[..., None])
        & ops.logical_not(met)
    )  # (A, N, M)
    start = ops.cast(ops.argmax(ops.cast(starts, "int32"), axis=-1), "int32")  # (A, N)
    started = ops.any(starts, axis=-1)
    met = met | (started[..., None] & (position == start[..., None]))
    current = ops.where(started, ops.where(at("last", start), -1, start + 1), current)
    return met, current


def _ranks(raw: Tensor, bank: Tensor, mask: Tensor) -> Tensor:
    """`(A, N)` -> each candidate's rank among the `mask`ed candidates of its bank: how
    many of them have a higher `raw`, or an equal one and a lower index."""
    n = raw.shape[1]
    index = ops.arange(n, dtype="int32")
    ahead = (raw[:, :, None] > raw[:, None, :]) | (
        (raw[:, :, None] == raw[:, None, :]) & (index[:, None] < index[None, :])[None]
    )  # (A, N, N): i ahead of j
    ahead = ahead & mask[:, :, None] & (bank[:, :, None] == bank[:, None, :])
    return ops.sum(ops.cast(ahead, "int32"), axis=1)  # (A, N)


def _pass_down(given: Tensor, counts: Tensor) -> Tensor:
    """From the top bank down, bank `i` keeps `min(count, given + passed down)` slots
    and passes the rest on: `(A, M+1)` slots taken. In closed form: with `S_i` the slots
    given to banks `>= i` and `R_i` their candidates, banks `>= i` take
    `U_i = R_i + min over m >= i of (S_m - R_m)` (`S`, `R` 0 past the last bank), and
    bank `i` takes `U_i - U_{i+1}`."""
    banks = counts.shape[1]

    def from_here(x):  # sums over banks >= i, and a 0 column past the last bank
        padded = ops.pad(x, ((0, 0), (0, 1)))  # (A, M+2)
        return ops.flip(ops.cumsum(ops.flip(padded, axis=1), axis=1), axis=1)

    s, r = from_here(given), from_here(counts)  # (A, M+2)
    later = ops.arange(banks)[None, :, None] <= ops.arange(banks + 1)[None, None, :]  # (1, M+1, M+2): m >= i
    low = ops.min(ops.where(later, (s - r)[:, None, :], 1 << 30), axis=2)  # (A, M+1)
    taken = r[:, :-1] + low  # U_i
    return taken - ops.pad(taken, ((0, 0), (0, 1)))[:, 1:]


def bank_slots(counts: Tensor, total: Tensor, beam_size: int) -> Tensor:
    """The beam slots each bank takes, `(A, M+1)`, from its candidates `counts (A, M+1)`
    and the sentence's constraint tokens `total (A,)` (banks `0 .. T`).

    Bank `i <= T` is given `K // (T+1)` slots, bank `T` the remainder as well; from bank
    `T` down, a bank with fewer candidates than slots passes the rest to the bank below
    (Sockeye's `get_bank_sizes`). The slots that reach past bank 0 go round once more
    from bank `T` down (Sockeye leaves them empty), so the beam stays full while there
    are candidates.
    """
    counts, total = ops.convert_to_tensor(counts, "int32"), ops.convert_to_tensor(total, "int32")
    top = ops.arange(counts.shape[1], dtype="int32")[None, :] == total[:, None]  # (A, M+1)
    share = beam_size // (total + 1)  # (A,)
    given = ops.where(ops.arange(counts.shape[1])[None, :] <= total[:, None], share[:, None], 0)
    given = given + ops.where(top, (beam_size - share * (total + 1))[:, None], 0)
    taken = _pass_down(given, counts)
    left = beam_size - ops.sum(taken, axis=1)  # (A,)
    return taken + _pass_down(ops.where(top, left[:, None], 0), counts - taken)


def constrained_beam_search(
    next_fn: NextFn,
    initial_states: list[Tensor] | tuple,
    batch_size: int,
    beam_size: int,
    max_length: int | Tensor,
    constraints: Tensor,
    bos_id: int = 2,
    eos_id: int = 3,
    pad_id: int = 0,
    length_penalty: str = "gnmt",
    alpha: float = 0.6,
    n_best: int = 1,
    return_attention: bool = False,
    early_stopping: bool = True,
    max_steps: int | None = None,
    prefix: Tensor | None = None,
    min_length: int = 0,
    no_repeat_ngram_size: int = 0,
) -> dict[str, Tensor]:
    """Beam search whose outputs contain given target phrases (see the module docstring).

    The arguments and the returned dict are `beam.beam_search`'s, plus `constraints`
    `(B, M)` int32: each sentence's phrases as target ids, phrases separated by
    `SEPARATOR` (-1), pad (0) after the last; a row of pad has none. Per step
    (`A = B` sentences, `N = C + K M + K` candidates):

    1. `log p` as in beam search (eos the only token at the limit, the bans of
       `min_length` and `no_repeat_ngram_size` before it), and before the limit eos
       `-inf` for a hypothesis that has not met all its constraints;
       `cand = alive_raw + log p` `(A, K, V)`.
    2. The candidates: the `C = min(2K, KV)` best of `cand`, each beam's allowed
       constraint tokens, each beam's best token; a repeated (beam, token) counts once.
    3. Each candidate's constraint state (`advance`) and bank (tokens met).
    4. Alive: the non-final candidates that `bank_slots` admits, best first.
    5. Finished: a final candidate ranked within the `K` best of its bank, merged into
       the finished buffer (ordered by score, unmet constraints last).
    6. A sentence is done as in beam search (limit, no alive hypothesis, the bound on
       what the alive ones can still reach, `K` finished with `early_stopping`).
    """
    check_beam(bos_id, eos_id, pad_id, length_penalty, beam_size, n_best)
    check_search_limits(min_length, no_repeat_ngram_size)
    penalty_kind = length_penalty

    def lp(lengths):
        return _length_penalty(lengths, penalty_kind, alpha)

    steps, limit = resolve_max_length(max_length, batch_size, max_steps)  # L, (B,)
    b, k = batch_size, beam_size
    tables = constraint_tables(constraints)  # (B, M) each
    m = constraints.shape[1]
    logits, states, attention = first_call(next_fn, b, bos_id, initial_states)
    grown = growing_axes(initial_states, states)  # axes a state grows along
    check_attention(attention, return_attention)
    vocab = logits.shape[-1]
    c = min(2 * k, k * vocab)
    carry = {
        "step": ops.convert_to_tensor(0, dtype="int32"),
        "last": ops.full((b * k,), bos_id, dtype="int32"),
        "states": [ops.repeat(s, k, axis=0) for s in states],  # (B*K, ·)
        "alive_tokens": ops.full((b, k, steps), pad_id, dtype="int32"),
        "alive_raw": ops.cast(ops.tile(ops.where(ops.arange(k) == 0, 0.0, NEG_INF)[None, :], (b, 1)), "float32"),
        "met": ops.zeros((b, k, m), dtype="bool"),  # (B, K, M)
        "current": ops.full((b, k), -1, dtype="int32"),  # (B, K)
        "fin_tokens": ops.full((b, k, steps), pad_id, dtype="int32"),
        "fin_key": ops.full((b, k), NEG_INF, dtype="float32"),
        "fin_scores": ops.full((b, k), NEG_INF, dtype="float32"),
        "fin_raw": ops.full((b, k), NEG_INF, dtype="float32"),
        "fin_lengths": ops.zeros((b, k), dtype="int32"),
        "done": ops.zeros((b,), dtype="bool"),
    }
    limit = ops.minimum(add_prefix(carry, prefix, limit) + tables["total"], steps)
    carry["limit"] = limit  # (B,)
    max_lp = lp(limit)
    if return_attention:
        tx = attention.shape[-1]
        attention = ops.repeat(ops.cast(attention, "float32"), k, axis=0)
        carry["alive_attention"] = ops.zeros((b, k, steps, tx), dtype="float32")
        carry["fin_attention"] = ops.zeros((b, k, steps, tx), dtype="float32")
    position = ops.arange(m, dtype="int32")[None, None, :]  # (1, 1, M)
    valid = tables["valid"][:, None, :]  # (B, 1, M)
    # Loop-invariant: each beam's constraint tokens (B, K, M) and each beam's offset k*V (1, K, 1).
    wanted = ops.repeat(tables["token"][:, None, :], k, axis=1)
    beams = ops.arange(k, dtype="int32")[None, :, None] * vocab

    def met_count(met):  # (A, X, M) -> (A, X)
        return ops.sum(ops.cast(met & valid, "int32"), axis=-1)

    def expand(carry, logits, new_states, attention):
        step, done = carry["step"], carry["done"]
        length = step + 1
        forced = ops.repeat(forced_tokens(carry, eos_id), k, axis=0)  # (A*K,)
        # 1. Log-probabilities; before the limit, eos only for a hypothesis that has met
        # every constraint.
        unmet = met_count(carry["met"]) < tables["total"][:, None]  # (A, K)
        blocked = ops.reshape(unmet[:, :, None] & (ops.arange(vocab) == eos_id)[None, None, :], (-1, vocab))
        bans = step_bans(
            ops.reshape(carry["alive_tokens"], (-1, steps)), step, vocab, eos_id, min_length, no_repeat_ngram_size
        )  # (A*K, V), (1, V) or None
        blocked = blocked if bans is None else blocked | bans  # (A*K, V)
        logp = ops.reshape(log_probs(logits, (pad_id, bos_id), forced, blocked), (-1, k, vocab))  # (A, K, V)
        cand = carry["alive_raw"][:, :, None] + logp  # (A, K, V)
        # 2. The candidates, as flat indices k*V + v.
        top_raw, top_index = ops.top_k(ops.reshape(cand, (-1, k * vocab)), c)  # (A, C)
        allowed = valid & ops.where(
            carry["current"][:, :, None] >= 0,
            position == carry["current"][:, :, None],
            tables["first"][:, None, :] & ops.logical_not(carry["met"]),
        )  # (A, K, M)
        want_raw = ops.where(allowed, ops.take_along_axis(cand, wanted, axis=2), NEG_INF)  # (A, K, M)
        best = ops.cast(ops.argmax(cand, axis=-1), "int32")  # (A, K)
        raw = ops.concatenate([top_raw, ops.reshape(want_raw, (-1, k * m)), ops.max(cand, axis=-1)], axis=1)
        index = ops.concatenate(
            [ops.cast(top_index, "int32"), ops.reshape(wanted + beams, (-1, k * m)), best + beams[:, :, 0]], axis=1
        )
        n = raw.shape[1]
        earlier = ops.arange(n)[:, None] < ops.arange(n)[None, :]  # (N, N)
        same = (index[:, :, None] == index[:, None, :]) & earlier[None] & (raw > NEG_INF)[:, :, None]  # (A, N, N)
        repeated = ops.any(same, axis=1)  # (A, N): a live candidate with the same index comes earlier
        raw = ops.where(repeated, NEG_INF, raw)  # (A, N)
        beam, token = index // vocab, index % vocab  # (A, N)
        # 3. Constraint states and banks.
        met, current = advance(
            tables, _gather(carry["met"], beam), ops.take_along_axis(carry["current"], beam, axis=1), token
        )
        bank = met_count(met)  # (A, N)
        tokens = write_step(_gather(carry["alive_tokens"], beam), token, step, time_axis=-1)  # (A, N, L)
        # 4. Alive.
        live = raw > NEG_INF
        final = (token == eos_id) | (length >= limit)[:, None]
        eligible = live & ops.logical_not(final)
        counts = ops.sum(
            ops.cast(eligible[:, :, None] & (bank[:, :, None] == ops.arange(m + 1)[None, None, :]), "int32"), axis=1
        )  # (A, M+1)
        slots = ops.take_along_axis(bank_slots(counts, tables["total"], k), bank, axis=1)  # (A, N)
        admitted = eligible & (_ranks(raw, bank, eligible) < slots)
        alive_raw, keep = ops.top_k(ops.where(admitted, raw, NEG_INF), k)  # (A, K)
        keep = ops.cast(keep, "int32")
        source = ops.take_along_axis(beam, keep, axis=1)  # (A, K)
        rows = ops.reshape(ops.arange(ops.shape(source)[0], dtype="int32")[:, None] * k + source, (-1,))
        new = {
            **carry,
            "step": length,
            "last": ops.reshape(ops.take_along_axis(token, keep, axis=1), (-1,)),
            "states": [
                s if s is old else ops.take(s, rows, axis=0) for s, old in zip(new_states, carry["states"], strict=True)
            ],
            "alive_tokens": _gather(tokens, keep),
            "alive_raw": alive_raw,
            "met": _gather(met, keep),
            "current": ops.take_along_axis(current, keep, axis=1),
        }
        if return_attention:
            step_attention = ops.reshape(ops.cast(attention, "float32"), (-1, k, tx))  # (A, K, Tx)

            def attention_of(beams):  # (A, X) source beams -> (A, X, L, Tx) with this step written
                return write_step(
                    _gather(carry["alive_attention"], beams), _gather(step_attention, beams), step, time_axis=2
                )

            new["alive_attention"] = attention_of(source)
        # 5. Finished: final candidates within the K best of their bank.
        finishing = final & live & (_ranks(raw, bank, live) < k) & ops.logical_not(done)[:, None]
        score = raw / lp(length)
        key = ops.where(
            finishing, score - UNMET_PENALTY * ops.cast(tables["total"][:, None] - bank, "float32"), NEG_INF
        )
        new_key, fresh = ops.top_k(key, k)  # (A, K): at most K enter the buffer
        fresh = ops.cast(fresh, "int32")
        fin_key, pick = ops.top_k(ops.concatenate([carry["fin_key"], new_key], axis=1), k)
        pick = ops.cast(pick, "int32")

        def merge(old, entries):  # entries (A, N, ...) of the candidates
            return _gather(ops.concatenate([old, _gather(entries, fresh)], axis=1), pick)

        new["fin_key"] = fin_key
        new["fin_scores"] = merge(carry["fin_scores"], ops.where(finishing, score, NEG_INF))
        new["fin_raw"] = merge(carry["fin_raw"], ops.where(finishing, raw, NEG_INF))
        new["fin_lengths"] = merge(carry["fin_lengths"], ops.zeros_like(token) + length)
        new["fin_tokens"] = merge(carry["fin_tokens"], tokens)
        if return_attention:
            fresh_beams = ops.take_along_axis(beam, fresh, axis=1)  # (A, K)
            new["fin_attention"] = _gather(
                ops.concatenate([carry["fin_attention"], attention_of(fresh_beams)], axis=1), pick
            )
        # 6. Done.
        nth = fin_key[:, n_best - 1]
        stop = (length >= limit) | (alive_raw[:, 0] == NEG_INF)
        stop = stop | ((nth > NEG_INF) & (nth > alive_raw[:, 0] / max_lp))
        if early_stopping:
            stop = stop | (ops.sum(ops.cast(fin_key > NEG_INF, "int32"), axis=1) >= k)
        new["done"] = done | stop
        return new

    def cond(carry, store):
        return (carry["step"] < steps) & ops.logical_not(ops.all(carry["done"]))

    def body(carry, store):
        logits, new_states, attention = next_fn(carry["last"], carry["states"])
        return expand(carry, logits, new_states, attention), store

    carry = expand(carry, ops.repeat(logits, k, axis=0), carry["states"], attention)
    carry, _ = while_loop(cond, body, carry, {}, varying=False, grown=grown)
    return n_best_outputs(carry, n_best, pad_id)
