"""An ensemble of trained models that decodes as one model.

The members run side by side, each on its own states; at every target step
their next-token distributions are mixed into one, which greedy and beam search
then use as if it came from a single model.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import ops

from keras_memnmt.models.generation import Generator


def _log_probs(logits):
    return ops.log_softmax(ops.cast(logits, "float32"), axis=-1)


@keras.saving.register_keras_serializable(package="keras_memnmt")
class Ensemble(Generator, keras.Model):
    """Several trained models that share the target vocabulary, decoding together.

    Each step, every member scores the next token from its own states, and the
    ensemble's distribution is the renormalized mean of the members'
    log-probabilities (our decision, the equally weighted log-linear mixture):

        log p(y | ·) = log_softmax( (1/M) Σ_m log_softmax(logits_m) )

    i.e. ``p ∝ (Π_m p_m)^(1/M)``, a geometric mean: a token any member finds very
    unlikely stays unlikely. (The other common rule, the arithmetic mean of the
    probabilities, ``log (1/M) Σ_m p_m``, is not what this class computes.)
    With one member, :meth:`decode_step` returns the member's own logits: the
    same distribution, and the search's log-softmax then gives exactly the
    member's tokens and scores.

    Members may be different architectures (an RNNsearch and a MemDec, say): each
    keeps its own encoder, decoder states and output layer; they must read the
    same source ids and write the same target ids. :meth:`generate` is
    :meth:`EncoderDecoder.generate <keras_memnmt.models.EncoderDecoder.generate>` (greedy or beam
    search, compiled once per shape on TensorFlow and JAX).

    Args:
        members: the trained models (at least one), each with ``encode``,
            ``decode_step`` and a ``target_vocab_size`` (every ``EncoderDecoder`` has them);
            also a ``source_vocab_size`` where the model has one.

    Call arguments:
        inputs: ``(source_ids (B, Tx), target_in_ids (B, T))`` int ids.

    Returns:
        the ensemble's log-probabilities ``(B, T, target_vocab_size)`` (teacher forcing).

    Example:

    >>> ensemble = Ensemble([rnnsearch, memdec])  # doctest: +SKIP
    >>> out = ensemble.generate(source_ids, beam_size=16, length_penalty="average")  # doctest: +SKIP
    """

    def __init__(self, members: Sequence[keras.Model], **kwargs):
        super().__init__(**kwargs)
        members = list(members)
        if not members:
            raise ValueError("an Ensemble needs at least one member, got none")
        for attribute in ("target_vocab_size", "source_vocab_size"):
            sizes = [getattr(m, attribute, None) for m in members]
            known = [(i, s) for i, s in enumerate(sizes) if s is not None]
            if attribute == "target_vocab_size" and len(known) < len(members):
                missing = [_describe(i, m) for i, m in enumerate(members) if getattr(m, attribute, None) is None]
                raise ValueError(f"every ensemble member needs a target_vocab_size; {', '.join(missing)} has none")
            if len({s for _, s in known}) > 1:
                listed = ", ".join(f"{_describe(i, members[i])}: {attribute}={s}" for i, s in known)
                raise ValueError(f"ensemble members must share the {attribute.split('_')[0]} vocabulary; got {listed}")
        self.members = members
        self.target_vocab_size = int(members[0].target_vocab_size)
        self.source_vocab_size = getattr(members[0], "source_vocab_size", None)
        self.built = all(getattr(m, "built", False) for m in members)
        self._state_counts: tuple[int, ...] | None = None

    def encode(self, source_ids, training=False) -> list:
        """Source ids → every member's initial states, concatenated in member order."""
        return self._join([member.encode(source_ids, training=training) for member in self.members])

    def search_states(self, source_ids, max_steps: int) -> list:
        """Every member's states for a search of at most ``max_steps`` steps (its own
        ``search_states`` where it has one, else its ``encode``'s), in member order."""
        return self._join(
            [
                member.search_states(source_ids, max_steps)
                if hasattr(member, "search_states")
                else member.encode(source_ids)
                for member in self.members
            ]
        )

    def _join(self, per_member: list[list]) -> list:
        # How many states each member has: Python ints, the same at every call.
        self._state_counts = tuple(len(own) for own in per_member)
        return [state for own in per_member for state in own]

    def _split(self, states) -> list[list]:
        if self._state_counts is None:
            raise ValueError("Ensemble.decode_step needs the states of Ensemble.encode; call encode first")
        if len(states) != sum(self._state_counts):
            raise ValueError(
                f"the ensemble's members have {sum(self._state_counts)} states "
                f"({', '.join(map(str, self._state_counts))}), got {len(states)}"
            )
        parts, start = [], 0
        for count in self._state_counts:
            parts.append(list(states[start : start + count]))
            start += count
        return parts

    def decode_step(self, tokens, states):
        """One step of every member: tokens ``(B,)`` → ``(log-probs (B, V), states, attention)``.

        The log-probabilities are the renormalized mean of the members' (see the
        class); the states are the members' new states concatenated, a state a
        member passes through being the very tensor it was given (beam search then
        leaves it in place); the attention ``(B, Tx)`` is the mean of the members'
        attentions that are not ``None``, ``None`` if all are.
        """
        new_states, attentions, logps = [], [], []
        for member, own in zip(self.members, self._split(states), strict=True):
            logits, member_states, attention = member.decode_step(tokens, own)
            new_states += list(member_states)
            if attention is not None:
                attentions.append(ops.cast(attention, "float32"))
            logps.append(logits)
        attention = None if not attentions else _mean(attentions)
        if len(self.members) == 1:
            return logps[0], new_states, attention
        return _log_probs(_mean([_log_probs(x) for x in logps])), new_states, attention

    def call(self, inputs, training=False):
        """Teacher forcing: the mixed log-probabilities ``(B, T, V)`` of every target position."""
        logps = [_log_probs(member(inputs, training=training)) for member in self.members]
        if len(logps) == 1:
            return logps[0]
        return _log_probs(_mean(logps))

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "members": [keras.saving.serialize_keras_object(m) for m in self.members],
        }

    @classmethod
    def from_config(cls, config: dict) -> Ensemble:
        config = dict(config)
        members = [keras.saving.deserialize_keras_object(m) for m in config.pop("members")]
        return cls(members, **config)


def _mean(tensors: list):
    total = tensors[0]
    for x in tensors[1:]:
        total = ops.add(total, x)
    return total if len(tensors) == 1 else ops.divide(total, float(len(tensors)))


def _describe(index: int, member) -> str:
    return f"member {index} ({getattr(member, 'name', type(member).__name__)})"
