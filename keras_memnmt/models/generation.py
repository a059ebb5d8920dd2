"""The compiled search behind ``generate``, shared by every model that decodes.

:class:`Generator` is a mixin for a ``keras.Model`` that provides
``encode(source_ids) -> [initial states]`` and
``decode_step(tokens, states) -> (logits, new_states, attention)`` (the step
callback of :mod:`keras_memnmt.decoding`): it adds :meth:`Generator.generate`,
greedy and beam search compiled once per shape on TensorFlow and JAX.
:class:`~keras_memnmt.models.EncoderDecoder` and :class:`~keras_memnmt.models.Ensemble`
both decode through it.
"""

from __future__ import annotations

import dataclasses

import keras
from keras import ops

from keras_memnmt.tokens import BOS_ID, EOS_ID, PAD_ID


@dataclasses.dataclass(frozen=True, kw_only=True)
class SearchPlan:
    """The settings of one compiled search, named: hashable, so that ``generate`` keys
    its compiled programs by it (with the extra inputs' names and the shape).

    The fields are ``generate``'s arguments of the same names; ``sampling`` is parsed,
    ``(kind, value)`` (``keras_memnmt.decoding.common.parse_sampling``) or ``None``.
    """

    beam_size: int = 1
    max_length_a: float = 1.5
    max_length_b: int = 10
    length_penalty: str = "gnmt"
    alpha: float = 0.6
    n_best: int = 1
    return_attention: bool = False
    sampling: tuple[str, float] | None = None
    temperature: float = 1.0
    min_length: int = 0
    no_repeat_ngram_size: int = 0


def _width_cap(width: int) -> int:
    """The source width a TensorFlow search is traced for: 64, or the next power of 2."""
    return max(64, 1 << (width - 1).bit_length())


class Generator:
    """Mixin: ``generate`` over the model's own ``encode`` and ``decode_step``.

    The model must be a ``keras.Model`` whose call on ``(source_ids, target_in_ids)``
    creates every weight, and whose variables (``trainable_variables``,
    ``non_trainable_variables``) are all that ``encode`` and ``decode_step`` read.
    """

    def search_states(self, source_ids, max_steps: int) -> list:
        """The states a search of at most ``max_steps`` steps starts from: ``encode``'s.

        A model whose states hold a slot per output position (the Transformer's key/value
        caches) sizes them to ``max_steps`` here.
        """
        return self.encode(source_ids)

    def generate(
        self,
        source_ids,
        beam_size: int = 1,
        max_length_a: float = 1.5,
        max_length_b: int = 10,
        length_penalty: str = "gnmt",
        alpha: float = 0.6,
        n_best: int = 1,
        return_attention: bool = False,
        prefix=None,
        sampling: str | None = None,
        temperature: float = 1.0,
        keys=None,
        constraints=None,
        min_length: int = 0,
        no_repeat_ngram_size: int = 0,
    ) -> dict:
        """Translates a batch of source ids (greedy when ``beam_size == 1``).

        ``prefix`` ``(B, P)`` int ids: each sentence's output starts with its row (pad
        after a shorter one), then the search goes on; its bound is then at least
        ``prefix length + max_length_b``. ``sampling`` (``"full"``, ``"topk:K"``,
        ``"topp:P"``; greedy only) draws each token from the model's distribution at
        ``temperature`` instead of taking the best, row ``b``'s draws set by
        ``keys[b]`` (int32; the same keys give the same samples on every backend).
        ``constraints`` ``(B, M)`` int ids (beam search only): target phrases each
        output must contain, phrases separated by -1, pad after the last
        (:mod:`keras_memnmt.decoding.constrained`); the bound grows by each
        sentence's constraint tokens. ``min_length``: eos is banned (log-probability
        ``-inf``) while a hypothesis has fewer tokens, its prefix included.
        ``no_repeat_ngram_size`` ``n >= 1``: a token that would complete an n-gram of
        ``n`` tokens already in the hypothesis (its prefix included) is banned; 0 is off.

        The output length is capped at ``max_length_a · |x| + max_length_b``
        tokens per sentence (eos included), and a hypothesis that reaches the cap
        takes eos as its last token (fairseq's rule, over ``min_length`` and the
        n-gram ban): every output ends with eos, and its score is the log-probability
        of its tokens and eos, what ``memnmt score`` gives the same text
        (:mod:`keras_memnmt.decoding.common`). The whole search is one compiled
        program on TensorFlow (``tf.function``) and JAX (``jax.jit``, weights
        passed in through a ``StatelessScope`` as keras-hub's samplers do, so a
        model that keeps training never decodes with stale weights); PyTorch
        runs it eagerly. JAX compiles one program per ``(B, width)`` shape;
        TensorFlow traces one per batch size for every source width up to 64 (or
        the next power of 2), except with ``return_attention``, whose ``(B, L, Tx)``
        buffers need the width: it traces one per shape.
        On TensorFlow and PyTorch finished sentences leave the search's loop as
        it goes (``compact`` in ``keras_memnmt.decoding``); JAX's loop keeps its
        shapes.

        Returns:
            dict with ``tokens (B, n_best, L)`` (pad after eos; on TensorFlow without
            attention ``L`` is the bound for the width cap), ``scores (B, n_best)``
            and, if asked, ``attention (B, n_best, L, Tx)``.
        """
        if beam_size < 1 or n_best < 1 or n_best > beam_size:
            raise ValueError(f"need 1 <= n_best <= beam_size, got n_best={n_best}, beam_size={beam_size}")
        from keras_memnmt.decoding.common import check_search_limits, parse_sampling

        check_search_limits(min_length, no_repeat_ngram_size)
        extras = {}
        if sampling is not None:
            if beam_size != 1:
                raise ValueError(f"sampling draws one token at a time: it needs beam_size 1, got {beam_size}")
            if not temperature > 0:
                raise ValueError(f"temperature must be > 0, got {temperature}")
            if keys is None:
                raise ValueError("sampling needs keys: one int32 key per sentence (its draws' seed)")
            sampling = parse_sampling(sampling)
            extras["keys"] = ops.convert_to_tensor(keys, "int32")
        if prefix is not None:
            extras["prefix"] = ops.convert_to_tensor(prefix, "int32")
        if constraints is not None:
            if beam_size < 2 or sampling is not None:
                raise ValueError(
                    f"constraints need beam search (beam_size 2 or more), got beam_size {beam_size}"
                    + (" and sampling" if sampling is not None else "")
                )
            extras["constraints"] = ops.convert_to_tensor(constraints, "int32")
        plan = SearchPlan(
            beam_size=int(beam_size),
            max_length_a=float(max_length_a),
            max_length_b=int(max_length_b),
            length_penalty=length_penalty,
            alpha=float(alpha),
            n_best=int(n_best),
            return_attention=bool(return_attention),
            sampling=sampling,
            temperature=float(temperature),
            min_length=int(min_length),
            no_repeat_ngram_size=int(no_repeat_ngram_size),
        )
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        if not self.built:  # create the weights eagerly: never inside jit / tf.function
            self((source_ids[:1], ops.full((1, 1), BOS_ID, "int32")))
        backend = keras.backend.backend()
        if backend == "torch":
            import torch

            with torch.no_grad():
                return self._generate(source_ids, plan=plan, extras=extras)
        # TensorFlow shares one trace per (batch, width cap); with attention, whose (B, L, Tx)
        # buffers need a static Tx, with a prefix, whose width sets the buffers', and on
        # JAX, the compiled function specializes per shape (so do constraints, whose width
        # sets the buffers' too).
        shared = backend == "tensorflow" and not return_attention and not {"prefix", "constraints"} & set(extras)
        batch, width = (int(d) for d in source_ids.shape)
        key = (
            (plan, tuple(sorted(extras)), batch, _width_cap(width))
            if shared
            else (plan, tuple(sorted(extras)), None, None)
        )
        cache = self.__dict__.setdefault("_compiled_generate", {})
        if key not in cache:
            cache[key] = self._compile_generate(plan, batch=key[2], width_cap=key[3], extras=key[1])
        return cache[key](source_ids, extras)

    def _compile_generate(self, plan: SearchPlan, batch=None, width_cap=None, extras=()):
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            # autograph=False: the search's loops and branches are keras.ops calls already,
            # and autograph's rewriting of every function it reaches (about 30, the layers'
            # included) took most of the tracing time: the first greedy pass over
            # test_2016_flickr went from 2.6-3.0 s to 1.6-1.7 s without it (docs/benchmarks.md).
            if width_cap is None:  # one trace per (batch, width) shape
                return tf.function(lambda src, extras: self._generate(src, plan=plan, extras=extras), autograph=False)
            # One trace for every source width up to `width_cap` (tracing and optimizing
            # the search graph takes seconds, so a trace per padded width made the first
            # pass over a test set several times slower than the second). The width is
            # left unknown; the output buffers are sized for `width_cap`, and the loop
            # still stops once every sentence has finished.
            spec = tf.TensorSpec([batch, None], tf.int32)
            extra_specs = {name: tf.TensorSpec([batch], tf.int32) for name in extras}  # keys
            return tf.function(
                lambda src, extras: self._generate(src, plan=plan, width_cap=width_cap, extras=extras),
                input_signature=[spec, extra_specs],
                autograph=False,
            )
        import jax

        @jax.jit
        def run(source_ids, extras, trainable, non_trainable):
            mapping = list(zip(self.trainable_variables, trainable)) + list(
                zip(self.non_trainable_variables, non_trainable)
            )
            with keras.StatelessScope(state_mapping=mapping):
                return self._generate(source_ids, plan=plan, extras=extras)

        return lambda src, extras: run(
            src, extras, [v.value for v in self.trainable_variables], [v.value for v in self.non_trainable_variables]
        )

    def _generate(self, source_ids, *, plan: SearchPlan, width_cap=None, extras=None) -> dict:
        """The search ``plan`` over ``source_ids`` ``(B, W)``, traced or eager; ``extras``:
        ``keys``, ``prefix`` and ``constraints`` where given (``generate``)."""
        from keras_memnmt.decoding import beam_search, greedy_search
        from keras_memnmt.decoding.constrained import constrained_beam_search

        extras = extras or {}
        batch, width = source_ids.shape  # static, except the width in TensorFlow's shared trace
        if width is None:
            width = width_cap
        if batch is None:  # a TensorFlow trace for any batch size (keras_memnmt.export)
            batch = ops.shape(source_ids)[0]
        source_len = ops.sum(ops.cast(ops.not_equal(source_ids, PAD_ID), "float32"), axis=1)  # (B,)
        max_length_a, max_length_b = plan.max_length_a, plan.max_length_b
        per_sentence = ops.cast(max_length_a * source_len + max_length_b, "int32")  # (B,)
        steps = int(max_length_a * width + max_length_b)  # static buffer width
        prefix = extras.get("prefix")
        if prefix is not None:  # room for the prefix and max_length_b tokens after it
            prefix_len = ops.sum(ops.cast(ops.not_equal(prefix, PAD_ID), "int32"), axis=1)  # (B,)
            per_sentence = ops.maximum(per_sentence, prefix_len + int(max_length_b))
            steps = max(steps, int(prefix.shape[1]) + int(max_length_b))
        constraints = extras.get("constraints")
        if constraints is not None:  # the limit grows by the sentence's constraint tokens (in the search)
            steps += int(constraints.shape[1])
        states = self.search_states(source_ids, steps)
        common = dict(
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            pad_id=PAD_ID,
            max_steps=steps,
            return_attention=plan.return_attention,
            prefix=prefix,
            min_length=plan.min_length,
            no_repeat_ngram_size=plan.no_repeat_ngram_size,
        )
        if plan.beam_size == 1:
            out = greedy_search(
                self.decode_step,
                states,
                batch,
                per_sentence,
                sampling=plan.sampling,
                temperature=plan.temperature,
                keys=extras.get("keys"),
                **common,
            )
            # (B, ...) -> (B, 1, ...): the same layout as beam search's n-best
            return {k: ops.expand_dims(v, 1) for k, v in out.items() if k in ("tokens", "scores", "attention")}
        beam = dict(length_penalty=plan.length_penalty, alpha=plan.alpha, n_best=plan.n_best, **common)
        if constraints is not None:
            return constrained_beam_search(
                self.decode_step, states, batch, plan.beam_size, per_sentence, constraints, **beam
            )
        return beam_search(self.decode_step, states, batch, plan.beam_size, per_sentence, **beam)
