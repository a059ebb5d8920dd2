"""The log-probability a model gives a translation: scores of given targets.

Teacher forcing, the path training takes (``model((source_ids, target_in_ids))``), gives
the logits of every target position at once; a token's log-probability is its logit's
log-softmax over the whole vocabulary, as the searches compute it (``decoding.common``),
so the score of a hypothesis that beam search found is the raw score (``length_penalty
"none"``) the search reported for it. An :class:`~keras_memnmt.models.Ensemble` scores
with its mixed distribution. Uses: rescoring n-best lists, filtering a noisy corpus
(fairseq's ``--score-reference``, Marian's scorer, OpenNMT-py's gold score).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import keras
import numpy as np

from keras_memnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID, SubwordVocab, encode_sources
from keras_memnmt.decoding.common import log_probs

# Sentences per teacher-forced batch by default: one forward pass holds (B, T, V) logits.
SCORE_BATCH_SENTENCES = 64


def token_log_probs(model, source_ids: np.ndarray, target_ids: np.ndarray) -> np.ndarray:
    """Each target token's log-probability ``(B, T)`` float32, 0 at padding.

    ``source_ids (B, Tx)`` and ``target_ids (B, T)`` (the tokens to score, eos included,
    pad after it); the decoder reads bos then ``target_ids[:, :-1]``. Runs the model's
    own compiled prediction (``predict_on_batch``), one program per shape.
    """
    target_ids = np.asarray(target_ids, np.int32)
    target_in = np.concatenate([np.full((len(target_ids), 1), BOS_ID, np.int32), target_ids[:, :-1]], axis=1)
    target_in[target_in == PAD_ID] = EOS_ID  # after eos: any id, masked below (as training pads)
    logits = model.predict_on_batch((np.asarray(source_ids, np.int32), target_in))  # (B, T, V)
    vocab = logits.shape[-1]
    # The searches' own log-softmax, nothing banned: a score is what a search reports.
    logp = np.asarray(keras.ops.convert_to_numpy(log_probs(np.reshape(logits, (-1, vocab)), ())), np.float32)
    picked = np.take_along_axis(logp.reshape(*target_ids.shape, vocab), target_ids[..., None], axis=-1)[..., 0]
    return np.where(target_ids == PAD_ID, 0.0, picked).astype(np.float32)


def score_ids(
    model,
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    batch_size: int = SCORE_BATCH_SENTENCES,
    pad_multiple: int = 8,
    progress: bool | None = None,
) -> list[np.ndarray | None]:
    """Per-token log-probabilities of each ``targets[i]`` given ``sources[i]`` (id lists;
    a target ends with eos), in input order; ``None`` for an empty source.

    Pairs are sorted by length and batched (widths padded to multiples of
    ``pad_multiple``: few shapes to compile); a sentence's scores do not depend on the
    rest of its batch. ``progress``: a bar on stderr (None: only on a terminal).
    """
    from tqdm.auto import tqdm

    from keras_memnmt.evaluation.translation import padded_rows, progress_disabled

    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    results: list[np.ndarray | None] = [None] * len(sources)
    todo = [i for i, s in enumerate(sources) if len(s)]
    order = sorted(todo, key=lambda i: (len(targets[i]), len(sources[i])))
    with tqdm(
        total=len(todo), desc="scoring", unit="sent", disable=progress_disabled(progress, len(todo)), file=sys.stderr
    ) as bar:
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            src = padded_rows([sources[i] for i in chunk], None, pad_multiple, PAD_ID)
            tgt = padded_rows([targets[i] for i in chunk], None, pad_multiple, PAD_ID)
            logp = token_log_probs(model, src, tgt)
            for row, i in enumerate(chunk):
                results[i] = logp[row, : len(targets[i])]
            bar.update(len(chunk))
    return results


def score_pairs(
    model,
    vocab: SubwordVocab,
    sources: Sequence[str],
    targets: Sequence[str],
    per_token: bool = False,
    batch_size: int = SCORE_BATCH_SENTENCES,
    progress: bool | None = None,
) -> list[dict]:
    """One dict per ``(source, target)`` pair of sentences, in input order:
    ``{"line": N, "score": log P(target | source), "tokens": subwords scored (eos
    included)}``, with ``per_token`` also ``"pieces"`` and ``"token_scores"``.

    The target is encoded as the run's target vocabulary encodes references (SentencePiece,
    then eos); the source as :func:`~keras_memnmt.evaluation.translation.translate`
    reads it (truncated, with a warning, beyond ``MAX_INPUT_TOKENS``). An empty source
    line has ``"score": None`` (a model never translates one); an empty target is the
    probability of eos alone.
    """
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} source lines but {len(targets)} target lines")
    filled = [i for i, s in enumerate(sources) if s.strip()]
    source_ids: list[list[int]] = [[] for _ in sources]
    for i, ids in zip(filled, encode_sources(vocab, [sources[i] for i in filled])):
        source_ids[i] = ids
    target_ids = [ids + [EOS_ID] for ids in vocab.target.encode([t.strip() for t in targets])]
    scores = score_ids(model, source_ids, target_ids, batch_size=batch_size, progress=progress)
    entries = []
    for i, (ids, logp) in enumerate(zip(target_ids, scores)):
        if logp is None:
            entry = {"line": i + 1, "score": None, "tokens": 0}
        else:
            entry = {"line": i + 1, "score": float(logp.sum(dtype=np.float64)), "tokens": len(ids)}
        if per_token:
            entry["pieces"] = [] if logp is None else [vocab.target.id_to_piece(t) for t in ids]
            entry["token_scores"] = [] if logp is None else [float(x) for x in logp]
        entries.append(entry)
    return entries
