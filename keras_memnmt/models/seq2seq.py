"""The Seq2Seq base model shared by every architecture.

One encoder, one decoder cell, one loop: ``call`` runs the cell inside
``keras.layers.RNN`` (teacher forcing) and :meth:`Seq2Seq.decode_step` runs the
same cell's single step for greedy and beam search, so a cell's equations live
in exactly one place (its ``_step``).

The seams a new architecture uses (see docs/extending.md):

- :meth:`Seq2Seq.make_encoder` builds the encoder: a layer with an
  ``annotation_units`` attribute whose call ``(source_ids, training)`` returns an
  :class:`~keras_memnmt.layers.EncoderOutput` (annotations, mask, summary, and
  every layer's final states for a layer-by-layer hand-off).
- :meth:`Seq2Seq.make_cell` builds the decoder cell, a
  :class:`~keras_memnmt.layers.DecoderCell`, which turns that ``EncoderOutput``
  into its initial states (:meth:`Seq2Seq.make_decoder` runs it over the target
  with ``keras.layers.RNN``; a decoder without a cell replaces that method).
- :meth:`Seq2Seq.warm_start` starts a model from a trained one (default: the
  same model, weights copied).
- Options are the constructor's keyword arguments (read by
  :func:`~keras_memnmt.models.model_options`); :attr:`Seq2Seq.free_options`
  names those that shape no weight.
- What only the model knows, which the library's tools ask it instead of naming it (each
  with a default that a new model may keep): :attr:`Seq2Seq.tiny_options` (its sizes in
  the shared tests), :attr:`Seq2Seq.fast_tier`, :attr:`Seq2Seq.panels` and
  :attr:`Seq2Seq.curves_title` (its pictures), :meth:`Seq2Seq.matmul_macs` (the
  benchmarks' analytic FLOPs).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from typing import Any, ClassVar

import keras
from keras import ops

from keras_memnmt.data.vocab import BOS_ID
from keras_memnmt.layers.base import DecoderCell, EncoderOutput
from keras_memnmt.models.encoder import BidirectionalEncoder, embedding_initializer
from keras_memnmt.models.generation import Generator
from keras_memnmt.models.panels import SOURCE_ATTENTION, Panel


class Seq2Seq(Generator, keras.Model):
    """Encoder–decoder base class: subclasses say which decoder cell (and encoder) to build.

    Args:
        source_vocab_size: source vocabulary size (ids ``0..V-1``, 0 = pad).
        target_vocab_size: target vocabulary size.
        embedding_dim: source and target embedding size.
        encoder_units: GRU units per encoder direction.
        decoder_units: decoder state size.
        dropout: dropout on the embeddings (training only).
        output_dropout: dropout on the deep-output layer (RNNsearch paper: 0.5).
        annotation_dropout: dropout on the encoder's annotations (training only; see
            :class:`~keras_memnmt.models.encoder.BidirectionalEncoder`).
        attention_remat: recompute the source attention's ``(B, Tx, A)`` tanh in the
            backward pass instead of keeping one per target step (``keras.remat``,
            see :class:`~keras_memnmt.layers.AdditiveAttention`); less training memory,
            the same values. A model without such an attention does not take it (below).
        tie_embeddings: the output layer's kernel is the target embedding matrix
            (weight tying, our option; see :class:`~keras_memnmt.layers.DeepOutput`):
            one ``V x E`` matrix fewer. Needs the cell's ``readout_units == embedding_dim``.
            Tied, the target embedding starts at ``N(0, 1/E)`` and its lookups are scaled
            by ``sqrt(E)`` (Vaswani et al. 2017, §3.4; our decision): the decoder's inputs
            keep the untied ``N(0, 1)`` scale, and the first logits ``t E^T`` have about
            unit scale instead of ``sqrt(E)`` (with ``N(0, 1)`` rows, Multi30k's val BLEU
            after 2 epochs was 12.0 against 19.6 untied).

    Call arguments:
        inputs: ``(source_ids (B, Tx), target_in_ids (B, T))`` int ids.

    Returns:
        logits ``(B, T, target_vocab_size)``.
    """

    # Options that shape no weight: a warm start or a resumed run may change them.
    free_options: tuple[str, ...] = ("dropout", "output_dropout", "annotation_dropout", "attention_remat")
    # This base's options that a subclass does not read. They are not its options
    # (`registry.model_options` leaves them out, so `--set` and a config name the model and
    # the option in an error); given to the constructor with a value other than the
    # default, they are a ValueError; a stored config's value (an older .keras file or
    # run), which never had an effect, is dropped when it loads.
    unused_options: tuple[str, ...] = ()

    # What only the model knows, for the library's tools (none of which names a model).
    #
    # The options of a tiny instance, a few units per layer and no dropout on the output:
    # the shared tests and the test helpers build every registered model with them
    # (`keras_memnmt.testing.tiny_runs.tiny_options`). The default sizes the options of this
    # base; a model with sizes of its own (an attention, a memory, layers) declares them all,
    # and so does a model that leaves one of these in `unused_options`.
    tiny_options: ClassVar[dict[str, Any]] = {
        "embedding_dim": 8, "encoder_units": 6, "decoder_units": 10, "output_dropout": 0.0}
    # True: the tests that repeat for every model run this one in the fast tier (the
    # README's test command); the others run there only with the tests marked `slow`. One
    # model per decoder family that the fast tier must cover sets it.
    fast_tier: ClassVar[bool] = False
    # The step details its pictures draw (`memnmt plot`, TensorBoard), in order, each with
    # its axis and labels (see `Panel`); a detail the step does not compute is not drawn.
    panels: ClassVar[tuple[Panel, ...]] = (SOURCE_ATTENTION,)
    # The title of the pictures' per-step curves (the target probabilities and the "scalar" panels).
    curves_title: ClassVar[str] = "per target step"

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        embedding_dim: int = 256,
        encoder_units: int = 256,
        decoder_units: int = 512,
        dropout: float = 0.0,
        output_dropout: float = 0.5,
        attention_remat: bool = True,
        annotation_dropout: float = 0.0,
        tie_embeddings: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        given, declared = locals(), inspect.signature(Seq2Seq.__init__).parameters
        for name in type(self).unused_options:
            if given[name] != declared[name].default:
                raise ValueError(f"model {type(self).__name__} does not use {name} (got {name}={given[name]!r})")
        if not isinstance(target_vocab_size, int) or target_vocab_size < 5:
            raise ValueError(f"target_vocab_size must be an integer >= 5, got {target_vocab_size!r}")
        self.source_vocab_size = source_vocab_size
        self.target_vocab_size = target_vocab_size
        self.embedding_dim = embedding_dim
        self.encoder_units = encoder_units
        self.decoder_units = decoder_units
        self.dropout = dropout
        self.output_dropout = output_dropout
        self.attention_remat = attention_remat
        self.annotation_dropout = annotation_dropout
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
            self.target_embedding = embedding(target_vocab_size, embedding_dim,
                                              embeddings_initializer=embedding_initializer(self.target_scale),
                                              name="target_embedding")
            self.target_dropout = keras.layers.Dropout(dropout)
            self.make_decoder()

    def build_weights(self) -> None:
        """Creates every weight by one call on a dummy batch (before weights are copied in)."""
        dummy = ops.full((1, 2), BOS_ID + 2, "int32")
        self((dummy, dummy))

    def make_encoder(self) -> keras.layers.Layer:
        """The encoder: a layer with ``annotation_units`` whose call returns an ``EncoderOutput``.

        Default: the bidirectional GRU encoder (:class:`BidirectionalEncoder`). Called
        once in ``__init__``, after the base arguments are set and before ``make_cell``.
        """
        return BidirectionalEncoder(self.source_vocab_size, self.embedding_dim, self.encoder_units,
                                    self.dropout, annotation_dropout=self.annotation_dropout,
                                    name="encoder")

    def make_decoder(self) -> None:
        """Creates the decoder's layers (once in ``__init__``, after the target embedding).

        Default: the cell of :meth:`make_cell` (``self.cell``), run over the target by
        ``keras.layers.RNN`` (``self.decoder_rnn``). A model whose decoder is no recurrent
        cell (:class:`~keras_memnmt.models.Transformer`) makes its own layers here and
        overrides :meth:`encode`, :meth:`call`, :meth:`decode_step` and :meth:`readout`.
        """
        self.cell = self.make_cell()
        if self.tie_embeddings and self.cell.readout_units != self.embedding_dim:
            raise ValueError(f"tie_embeddings needs readout_units == embedding_dim, got "
                             f"readout_units={self.cell.readout_units}, embedding_dim={self.embedding_dim}")
        self.decoder_rnn = keras.layers.RNN(self.cell, return_sequences=True, name="decoder")

    def make_cell(self) -> DecoderCell:
        """The decoder cell (see keras_memnmt/layers); subclasses override this.

        ``self.encoder.annotation_units`` is the size of the annotations it receives.
        """
        raise NotImplementedError(f"{type(self).__name__} must define make_cell()")

    def encode(self, source_ids, training=False) -> list:
        """Source ids → the decoder's initial states (all 2-D, batch first)."""
        encoded = self.encoder(source_ids, training=training)
        if not isinstance(encoded, EncoderOutput):
            raise TypeError(f"{type(self.encoder).__name__} returned {type(encoded).__name__}; "
                            "an encoder returns an EncoderOutput")
        # `training` reaches cells with a stochastic start (MemDec's Eq. 14 memory noise).
        return list(self.cell.initial_states(encoded, training=training))

    def call(self, inputs, training=False):
        source_ids, target_in = inputs
        states = self.encode(source_ids, training=training)
        outputs = self.decode_sequence(target_in, states, training=training)  # (B,T,O)
        return self.readout(outputs, training=training)  # (B, T, V)

    def decode_sequence(self, target_in, states, training=False):
        """Teacher-forced decoder loop: target ids ``(B, T)`` and initial states → outputs ``(B, T, O)``."""
        embedded = self.target_dropout(self.embed_target(target_in), training=training)  # (B,T,E)
        embedded = self.cell.drop_inputs(embedded, training=training)  # the cell's own, if any
        inputs = self.cell.prepare_inputs(embedded, target_in)  # the cell's own lookups, if any
        inputs = self.cell.project_inputs(inputs)  # + its input side, for the whole sequence at once
        with self.cell.outside_the_loop():  # the kernel slices the loop reads, sliced once
            return self.decoder_rnn(inputs, initial_state=list(states), training=training)

    def decode_step(self, tokens, states):
        """One decoding step: previous tokens ``(B,)`` → ``(logits (B,V), states, attention)``.

        The same ``cell.step`` and :meth:`readout` that ``call`` runs in training.
        """
        inputs = self.cell.prepare_inputs(self.embed_target(tokens), tokens)  # (B, E) or more
        output, new_states, attention = self.cell.step(inputs, states, training=False)
        return self.readout(output, training=False), list(new_states), attention

    def embed_target(self, tokens):
        """Target ids → the decoder's input embeddings (scaled by ``sqrt(E)`` when tied)."""
        embedded = self.target_embedding(tokens)
        return ops.multiply(embedded, self.target_scale) if self.tie_embeddings else embedded

    def readout(self, outputs, training=False):
        """The cell's deep output (Eq. 9), given the target embedding when the output is tied."""
        tied = self.target_embedding if self.tie_embeddings else None
        return self.cell.readout(outputs, training=training, output_embedding=tied)

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
        figures wrong without a sign. :meth:`gru_encoder_macs` and
        :meth:`deep_output_macs` count the parts that several models share.
        """
        return None

    def gru_encoder_macs(self) -> int:
        """Per source token: the default encoder's two GRU directions (3 gates, ``h`` units each)."""
        e, h = self.embedding_dim, self.encoder_units
        return 2 * 3 * h * (e + h)

    def deep_output_macs(self, inputs: int) -> int:
        """Per target token: a deep output of ``readout_units`` reading ``inputs`` features,
        then the output layer over the target vocabulary (``readout_units x V``)."""
        return self.readout_units * inputs + self.readout_units * self.target_vocab_size

    @classmethod
    def warm_start(cls, pretrained: Seq2Seq, options: dict, log: Callable[[str], None] = print) -> Seq2Seq:
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
        # An older file may hold an option this model never read: it had no effect.
        config = {k: v for k, v in config.items() if k not in cls.unused_options}
        return super().from_config(config, custom_objects=custom_objects)

    def get_config(self) -> dict:
        config = {
            **super().get_config(),
            "source_vocab_size": self.source_vocab_size,
            "target_vocab_size": self.target_vocab_size,
            "embedding_dim": self.embedding_dim,
            "encoder_units": self.encoder_units,
            "decoder_units": self.decoder_units,
            "dropout": self.dropout,
            "output_dropout": self.output_dropout,
            "attention_remat": self.attention_remat,
            "annotation_dropout": self.annotation_dropout,
            "tie_embeddings": self.tie_embeddings,
        }
        return {k: v for k, v in config.items() if k not in type(self).unused_options}


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
