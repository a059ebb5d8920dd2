"""The encoder–decoder base every model shares.

:class:`EncoderDecoder` holds what does not depend on how the decoder computes: the
options every model takes (``embedding_dim``, ``dropout``, ``tie_embeddings``), the target
embedding (tied or not), ``get_config``, the warm start, the compiled search
(:class:`~keras_memnmt.models.generation.Generator`: greedy and beam search over the
model's own step) and what the library's tools ask every model instead of naming it.
:class:`~keras_memnmt.models.recurrent.RecurrentEncoderDecoder` builds on it for a
decoder cell inside ``keras.layers.RNN``; a decoder that is no cell (the Transformer's
layers, a convolution) subclasses this class directly.

The seams a subclass fills in (see docs/extending.md):

- :meth:`EncoderDecoder.make_encoder` and :meth:`EncoderDecoder.make_decoder` create the
  layers, once in ``__init__``, under the model's dtype policy.
- :meth:`EncoderDecoder.call` is teacher forcing: ``(source_ids, target_in_ids)`` to
  logits ``(B, T, V)``, what ``fit`` trains.
- The search contract, what ``generate``, the ensembles, the pictures and the exported
  translator run: :meth:`EncoderDecoder.encode` (source ids to the decoding states),
  :meth:`EncoderDecoder.search_states` (the same, for a search of a known number of
  steps) and :meth:`EncoderDecoder.decode_step` (one target position). A state is a
  tensor whose first axis is the batch, of any rank and dtype after it: a recurrent
  cell's ``(B, units)`` vector, the source mask ``(B, Tx)``, a window of recent inputs
  ``(B, K, E)``, the Transformer's ``(B, 2, L, H, D/H)`` key/value caches. The decoding
  states are a list of such tensors, as many and as shaped after each step as before it:
  beam search reorders and drops their rows (``keras_memnmt.decoding``).
- Options are the constructor's keyword arguments, each read by the model (the registry,
  :func:`~keras_memnmt.models.model_options`, reads them from the constructors of the
  model's classes); :attr:`EncoderDecoder.free_options` names those that shape no weight.
- What only the model knows, with a default here that a model may keep:
  :attr:`EncoderDecoder.tiny_options` (its sizes in the shared tests),
  :attr:`EncoderDecoder.fast_tier`, :attr:`EncoderDecoder.panels` and
  :attr:`EncoderDecoder.curves_title` and :attr:`EncoderDecoder.picture_note` (its pictures), :meth:`EncoderDecoder.matmul_macs`
  (the benchmarks' analytic FLOPs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, ClassVar

import keras
from keras import ops

from keras_memnmt.layers.embedding import embedding_initializer
from keras_memnmt.models.generation import Generator
from keras_memnmt.models.panels import SOURCE_ATTENTION, Panel
from keras_memnmt.tokens import BOS_ID

# Options that every model took when one base class held them all: a stored config (a
# .keras file, a run's config.json) of a model that takes none of them may still hold
# them, with no effect. They are dropped where such a config is read.
FORMER_BASE_OPTIONS = ("encoder_units", "decoder_units", "output_dropout", "attention_remat", "annotation_dropout")


class EncoderDecoder(Generator, keras.Model):
    """Encoder–decoder base: subclasses make the encoder and the decoder, and step it.

    Args:
        source_vocab_size: source vocabulary size (ids ``0..V-1``, 0 = pad).
        target_vocab_size: target vocabulary size.
        embedding_dim: target (and, by the encoders of the library, source) embedding size.
        dropout: dropout on the embeddings (training only); a model may also apply it
            elsewhere (the Transformer: every sub-layer).
        tie_embeddings: the output layer's kernel is the target embedding matrix
            (weight tying): one ``V x E`` matrix fewer. Tied, the target embedding starts
            at ``N(0, 1/E)`` and its lookups are scaled by ``sqrt(E)`` (Vaswani et al. 2017,
            §3.4; our decision): the decoder's inputs keep the untied ``N(0, 1)`` scale, and
            the first logits ``t E^T`` have about unit scale instead of ``sqrt(E)`` (with
            ``N(0, 1)`` rows, Multi30k's val BLEU after 2 epochs was 12.0 against 19.6
            untied). The decoder's last features must then be ``embedding_dim`` wide.

    Call arguments:
        inputs: ``(source_ids (B, Tx), target_in_ids (B, T))`` int ids.

    Returns:
        logits ``(B, T, target_vocab_size)``.
    """

    # Options that shape no weight: a warm start or a resumed run may change them.
    free_options: tuple[str, ...] = ("dropout",)

    # What only the model knows, for the library's tools (none of which names a model).
    #
    # The options of a tiny instance, a few units per layer and no dropout on the output:
    # the shared tests and the test helpers build every registered model with them
    # (`keras_memnmt.testing.tiny_runs.tiny_options`). The default sizes the options of this
    # base; a model with sizes of its own declares them all.
    tiny_options: ClassVar[dict[str, Any]] = {"embedding_dim": 8}
    # True: the tests that repeat for every model run this one in the fast tier (the
    # README's test command); the others run there only with the tests marked `slow`. One
    # model per decoder family that the fast tier must cover sets it.
    fast_tier: ClassVar[bool] = False
    # The step details its pictures draw (`memnmt plot`, TensorBoard), in order, each with
    # its axis and labels (see `Panel`); a detail the step does not compute is not drawn.
    panels: ClassVar[tuple[Panel, ...]] = (SOURCE_ATTENTION,)
    # The title of the pictures' per-step curves (the target probabilities and the "scalar" panels).
    curves_title: ClassVar[str] = "per target step"
    # What the pictures' title adds about what they cannot show (a model without attention).
    picture_note: ClassVar[str] = ""

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        embedding_dim: int = 256,
        dropout: float = 0.0,
        tie_embeddings: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(target_vocab_size, int) or target_vocab_size < 5:
            raise ValueError(f"target_vocab_size must be an integer >= 5, got {target_vocab_size!r}")
        self.source_vocab_size = source_vocab_size
        self.target_vocab_size = target_vocab_size
        self.embedding_dim = embedding_dim
        self.dropout = dropout
        self.tie_embeddings = tie_embeddings
        # Every sublayer takes this model's dtype policy (Keras would give it the global one), so
        # that a model loaded from a .keras file computes in the policy it was saved with.
        with _sublayer_policy(self.dtype_policy):
            self.encoder = self.make_encoder()
            # Tied, an Embedding that also projects back (`reverse=True`, the output layer):
            # Keras's ReversibleEmbedding, which keras-hub re-exports. Untied, a plain Embedding:
            # .keras files key a model's layers by class name, so older runs keep loading.
            embedding = keras.layers.ReversibleEmbedding if tie_embeddings else keras.layers.Embedding
            self.target_scale = float(embedding_dim) ** 0.5 if tie_embeddings else 1.0
            self.target_embedding = embedding(
                target_vocab_size,
                embedding_dim,
                embeddings_initializer=embedding_initializer(self.target_scale),
                name="target_embedding",
            )
            self.target_dropout = keras.layers.Dropout(dropout)
            self.make_decoder()

    def build_weights(self) -> None:
        """Creates every weight by one call on a dummy batch (before weights are copied in)."""
        dummy = ops.full((1, 2), BOS_ID + 2, "int32")
        self((dummy, dummy))

    def make_encoder(self) -> keras.layers.Layer:
        """The encoder layer, kept as ``self.encoder`` (called once in ``__init__``, after
        the options are set and before the target embedding)."""
        raise NotImplementedError(f"{type(self).__name__} must define make_encoder()")

    def make_decoder(self) -> None:
        """Creates the decoder's layers as attributes (called once in ``__init__``, after
        the target embedding)."""
        raise NotImplementedError(f"{type(self).__name__} must define make_decoder()")

    def call(self, inputs, training=False):
        """Teacher forcing: ``(source_ids (B, Tx), target_in_ids (B, T))`` → logits ``(B, T, V)``."""
        raise NotImplementedError(f"{type(self).__name__} must define call()")

    def encode(self, source_ids, training=False) -> list:
        """Source ids ``(B, Tx)`` → the decoding states at bos: a list of tensors, each
        batch first, of any rank after the batch axis (see the module docstring)."""
        raise NotImplementedError(f"{type(self).__name__} must define encode()")

    def decode_step(self, tokens, states):
        """One target position: previous tokens ``(B,)`` and the states →
        ``(logits (B, V), new states, attention (B, Tx) or None)``.

        The new states have the shapes and dtypes of ``states``; a state the step does not
        change (the encoder's memory) is returned as the very tensor given, which beam
        search then leaves in place. The logits are those that :meth:`call` gives the same
        position.
        """
        raise NotImplementedError(f"{type(self).__name__} must define decode_step()")

    def step_details(self, tokens, states) -> dict:
        """:meth:`decode_step` with the named values the step computed, for the pictures:
        a dict with "logits" ``(B, V)``, "states" (the new states) and the details by name
        ("attention" ``(B, Tx)`` where the step returns one; a recurrent model: its cell's
        :meth:`~keras_memnmt.layers.DecoderCell.step_details`)."""
        logits, new_states, attention = self.decode_step(tokens, states)
        return {"logits": logits, "states": list(new_states), "attention": attention}

    def embed_target(self, tokens):
        """Target ids → the decoder's input embeddings (scaled by ``sqrt(E)`` when tied)."""
        embedded = self.target_embedding(tokens)
        return ops.multiply(embedded, self.target_scale) if self.tie_embeddings else embedded

    def make_output_layer(self) -> keras.layers.Layer | None:
        """The output projection of a decoder whose last features are ``embedding_dim``
        wide, for :meth:`output_logits` (a model keeps it as ``self.output_layer``): untied,
        a ``Dense`` of ``target_vocab_size`` units without bias (fairseq's Transformer);
        tied, None (the target embedding's transpose projects)."""
        if self.tie_embeddings:
            return None
        return keras.layers.Dense(self.target_vocab_size, use_bias=False, name="output")

    def output_logits(self, hidden):
        """``hidden (..., embedding_dim)`` → logits ``(..., V)``: ``hidden E^T`` with the target
        embedding ``E`` when tied (Press & Wolf 2017), else ``self.output_layer``."""
        if self.tie_embeddings:
            return self.target_embedding(hidden, reverse=True)
        return self.output_layer(hidden)

    def matmul_macs(self) -> tuple[int, int] | None:
        """The multiply-accumulates of one forward pass's matrix products at this model's
        sizes, ``(per source token, per target token)``: what ``benchmarks/throughput.py``
        turns into analytic FLOPs (``3 * 2 * MACs`` for the forward and backward passes).

        Counted: every kernel a token goes through, the encoder's (and the attention keys')
        per source token, the decoder's and the output layer's per target token. Left out:
        lookups, element-wise work, products that grow with the source length (attention
        scores and weighted sums) and what runs once per sentence.

        Default ``None``, not counted: the benchmarks then print the model's timings without
        its FLOP rate, and say so. A count is not derived from the weights because a kernel's
        shape says how large one product is, not how often it runs (per source token, per
        target token, once per sentence): a guessed count would make the fraction-of-peak
        figures wrong without a sign.
        """
        return None

    @classmethod
    def warm_start(
        cls, pretrained: EncoderDecoder, options: dict, log: Callable[[str], None] = print
    ) -> EncoderDecoder:
        """A new model with ``options``, its weights copied from the trained ``pretrained``.

        Default: ``pretrained`` must be the same model with the same weight-shaping
        options (only :attr:`free_options`, such as the dropout rates, may change);
        a ``ValueError`` names each difference. Subclasses that can start from another
        architecture (MemDec from RNNsearch) override this; keyword arguments they add
        after ``options`` are model options too (``--set`` reaches them).
        """
        if type(pretrained) is not cls:
            raise ValueError(f"a {type(pretrained).__name__} is not a {cls.__name__}")
        model = cls(pretrained.source_vocab_size, pretrained.target_vocab_size, **options)
        changed = option_differences(pretrained, model)
        if changed:
            raise ValueError(", ".join(changed))
        pretrained.build_weights()
        model.build_weights()
        model.set_weights(pretrained.get_weights())
        return model

    @classmethod
    def from_config(cls, config: dict, custom_objects=None):
        from keras_memnmt.models.registry import model_options

        # An older file may hold a former base option this model does not take: it had no effect.
        taken = model_options(cls)
        config = {k: v for k, v in config.items() if k not in FORMER_BASE_OPTIONS or k in taken}
        return super().from_config(config, custom_objects=custom_objects)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "source_vocab_size": self.source_vocab_size,
            "target_vocab_size": self.target_vocab_size,
            "embedding_dim": self.embedding_dim,
            "dropout": self.dropout,
            "tie_embeddings": self.tie_embeddings,
        }


@contextlib.contextmanager
def _sublayer_policy(policy):
    """Keras's global dtype policy is ``policy`` inside the block (a layer made without a
    ``dtype`` takes the global policy), and what it was before afterwards."""
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(before)


def option_differences(before: keras.Model, now: keras.Model) -> list[str]:
    """``name=old (now new)`` for every weight-shaping option in which two models differ.

    Read from the models' own ``get_config()``; the options in ``now``'s
    ``free_options`` and Keras's ``name`` / ``trainable`` / ``dtype`` are left out.
    """
    free = {"name", "trainable", "dtype", *getattr(now, "free_options", ())}
    a = {k: v for k, v in before.get_config().items() if k not in free}
    b = {k: v for k, v in now.get_config().items() if k not in free}
    return [f"{k}={a.get(k)!r} (now {b.get(k)!r})" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
