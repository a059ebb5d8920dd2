"""MemDec (Wang et al. 2016): RNNsearch with a matrix memory in the decoder, and its
pre-training from a trained RNNsearch model (paper §4.2)."""

from __future__ import annotations

import keras

from keras_memnmt.layers._checks import check_choice
from keras_memnmt.layers.memdec import MemDecCell, resolve_addressing
from keras_memnmt.models.panels import SOURCE_ATTENTION, Panel
from keras_memnmt.models.recurrent import Seq2Seq
from keras_memnmt.models.registry import register_model
from keras_memnmt.models.rnnsearch import RNNsearch


@register_model("memdec")
class MemDec(Seq2Seq):
    """Bidirectional GRU encoder + :class:`MemDecCell` (memory-enhanced GRU decoder).

    Args (beyond :class:`~keras_memnmt.models.Seq2Seq`):
        attention_units: hidden size of the additive source attention (Eq. 3), as in
            :class:`RNNsearch` (default 512).
        readout_units: size of the deep-output tanh layer (Eq. 9; default 256); equal to
            ``embedding_dim`` for tying.
        memory_size: n, the number of memory cells (paper: 8; default 8).
        memory_dim: m, the size of a memory cell; None (default): ``decoder_units``.
        address_units: hidden size of the memory addressing's score (Eq. 12); None
            (default): ``attention_units``; ``memory_dim`` gives the paper's shapes.
        address_nonlinearity: the content score of Eq. 12, "tanh" (default:
            ``v^T tanh(W_a M(i) + U_a s)``) or "none" (as printed, without the tanh).
        addressing: how reading and writing share the addressing (§3.2):
            "shared_weights" (None, the default: one addressing per step, whose write
            weights are the next step's read weights), "shared_parameters" (one set of
            parameters, two addressings per step) or "separate" (two sets).
        shared_addressing: the legacy name of ``addressing`` in models saved before it
            (True: "shared_parameters", False: "separate"); None (default): not given.
        init_noise_std: standard deviation of the noise ``nu_i`` added to the initial
            memory cells (Eq. 14; default 0.1); 0 disables it (the cells then stay equal).
        init_noise: when ``nu`` is drawn (Eq. 14): "fixed" (default: once, when the cell is
            built, saved with the model) or "sample" (afresh for every sentence).
        noise_at_inference: with ``init_noise="sample"``, draw the noise in decoding too
            (stochastic decoding); default False: in training only.
        query_state: add ``W^s s_{t-1}`` to the attention query of Eq. 5 (our addition, not
            in the paper; default False); with it, the RNNsearch warm start computes exactly
            the pre-trained RNNsearch until the read weights move.

    See :class:`MemDecCell`, where each paper ambiguity is documented at its equation.
    """

    tiny_options = dict(
        embedding_dim=8,
        encoder_units=6,
        decoder_units=10,
        attention_units=9,
        readout_units=7,
        output_dropout=0.0,
        memory_size=4,
        memory_dim=5,
    )
    fast_tier = True  # the memory decoders
    # What the memory holds beside what is read from it: a step writes from s_t, which has
    # read y_{t-1} (its input, the label of its column) and predicts y_t (its row's label).
    panels = (
        SOURCE_ATTENTION,
        Panel("read_weights", "memory", "memory read weights ({size} cells)", "memory cell"),
        Panel(
            "write_weights",
            "writes",
            "what the memory holds: write weights ({size} cells)",
            "the word each step writes (its input)",
            caption="Column t is step t (row t of the other panels): it writes from $s_t$, which "
            "has read $y_{t-1}$ (the label) and predicts $y_t$. With shared weights (the "
            "default addressing) step t+1 reads with these weights: read row t+1 is "
            "column t (row 1 reads 1/n).",
        ),
        Panel(
            "add_weights",
            "writes",
            "what the memory holds: add weights ({size} cells)",
            "the word each step writes (its input)",
            caption="The write weight times the mean of the add vector (Eq. 13): how much of "
            "step t each cell takes in; a column sums to the step's mean add.",
        ),
        Panel("erase_mean", "scalar", "mean erase"),
        Panel("add_mean", "scalar", "mean add"),
    )
    curves_title = "per target step: the memory write's erase and add vectors"

    def __init__(
        self,
        source_vocab_size: int,
        target_vocab_size: int,
        attention_units: int = 512,
        readout_units: int = 256,
        memory_size: int = 8,
        memory_dim: int | None = None,
        address_units: int | None = None,
        address_nonlinearity: str = "tanh",
        addressing: str | None = None,
        shared_addressing: bool | None = None,
        init_noise_std: float = 0.1,
        init_noise: str = "fixed",
        noise_at_inference: bool = False,
        query_state: bool = False,
        **kwargs,
    ):
        self.attention_units = attention_units
        self.readout_units = readout_units
        self.memory_size = memory_size
        self.memory_dim = memory_dim
        self.address_units = address_units
        self.address_nonlinearity = address_nonlinearity
        self.addressing = resolve_addressing(addressing, shared_addressing)
        self.init_noise_std = init_noise_std
        self.init_noise = init_noise
        self.noise_at_inference = noise_at_inference
        self.query_state = query_state
        super().__init__(source_vocab_size, target_vocab_size, **kwargs)

    def make_cell(self) -> keras.layers.Layer:
        return MemDecCell(
            self.decoder_units,
            self.target_vocab_size,
            attention_units=self.attention_units,
            readout_units=self.readout_units,
            annotation_units=self.encoder.annotation_units,
            memory_size=self.memory_size,
            memory_dim=self.memory_dim,
            address_units=self.address_units,
            address_nonlinearity=self.address_nonlinearity,
            addressing=self.addressing,
            init_noise_std=self.init_noise_std,
            init_noise=self.init_noise,
            noise_at_inference=self.noise_at_inference,
            query_state=self.query_state,
            output_dropout=self.output_dropout,
            tied_output=self.tie_embeddings,
            attention_remat=self.attention_remat,
            name="memdec_cell",
        )

    def matmul_macs(self) -> tuple[int, int]:
        e, h, d, a = self.embedding_dim, self.encoder_units, self.decoder_units, self.attention_units
        n, m, am = self.cell.memory_size, self.cell.memory_dim, self.cell.address_units
        keys = 2 * h * a  # U_a h_j, per source token
        decoder = 3 * d * (e + 2 * h + m + d)  # GRU on [e; c; r] with state d
        decoder += (m + e) * d + a * d  # the pre-state s~ (Eq. 5), W_a s~
        heads = 1 if self.cell.addressing == "shared_weights" else 2  # addressings per step
        decoder += n * m * am + heads * (d * am + d)  # the memory projected once; U_a s and the gate per head
        decoder += 2 * d * m  # erase and add
        return self.gru_encoder_macs() + keys, decoder + self.deep_output_macs(d + 2 * h + e)

    @classmethod
    def warm_start(cls, pretrained: Seq2Seq, options: dict, log=print, warm_start_new: str = "zeros") -> Seq2Seq:
        """MemDec from a trained RNNsearch (§4.2, :func:`memdec_from_rnnsearch`), else from a
        MemDec (:meth:`~keras_memnmt.models.EncoderDecoder.warm_start`).

        Args:
            pretrained: the trained RNNsearch or MemDec.
            options: the options of the new MemDec (its dropout rates included); the
                embedding, encoder and decoder sizes are the RNNsearch's, and
                ``tie_embeddings`` must agree with it (the deep outputs' weights differ).
            log: where the warm start reports what it does.
            warm_start_new: from an RNNsearch, how the matrices that feed the memory read
                into the copied decoder start: "zeros" (default) or "initializer" (see
                :func:`memdec_from_rnnsearch`).
        """
        if not isinstance(pretrained, RNNsearch):
            return super().warm_start(pretrained, options, log)
        tied = options.get("tie_embeddings", False)
        if pretrained.tie_embeddings != tied:
            raise ValueError(
                f"the RNNsearch has tie_embeddings={pretrained.tie_embeddings}, this "
                f"config tie_embeddings={tied}: they must agree"
            )
        log(f"new read weights: {warm_start_new}")
        memdec_only = {k: v for k, v in options.items() if k not in pretrained.get_config() or k in cls.free_options}
        return memdec_from_rnnsearch(pretrained, new_weights=warm_start_new, **memdec_only)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "attention_units": self.attention_units,
            "readout_units": self.readout_units,
            "memory_size": self.memory_size,
            "memory_dim": self.memory_dim,
            "address_units": self.address_units,
            "address_nonlinearity": self.address_nonlinearity,
            "addressing": self.addressing,
            "init_noise_std": self.init_noise_std,
            "init_noise": self.init_noise,
            "noise_at_inference": self.noise_at_inference,
            "query_state": self.query_state,
        }


def memdec_from_rnnsearch(rnnsearch: RNNsearch, new_weights: str = "zeros", **memdec_kwargs) -> MemDec:
    """A MemDec model initialized from a trained RNNsearch (MemDec paper §4.2).

    Copied unchanged: source and target embeddings, the whole encoder, the s_0
    layer, the source attention, the deep output, the GRU's recurrent kernel and
    bias, and the GRU kernel rows of the shared inputs ``[e; c]`` (MemDecCell
    orders its GRU input ``[e; c; r]`` so they are one block). From the
    feedback query only the ``W^y`` rows (acting on ``e``) and the bias are
    copied: RNNsearch's ``W`` acts on the state ``s_{t-1}``, MemDec's ``W^r``
    on the memory read ``r_{t-1}``, a different space, so ``W^r`` starts fresh
    (our decision). With ``query_state=True`` (our addition to Eq. 5, see
    :class:`MemDecCell`) MemDec's query has a ``W^s s_{t-1}`` term and ``W`` is
    copied into it: the whole query is then RNNsearch's. The memory parameters
    (initialization, addressing, erase, add) start from their initializers; then
    the whole model is fine-tuned.

    ``new_weights`` sets the two matrices that feed the memory read into the
    copied decoder, the GRU kernel rows of ``r`` (Eq. 7) and ``W^r`` (Eq. 5):
    ``"zeros"`` (default, our decision; the paper does not say) starts them at
    zero, so at the first fine-tuning step the read adds nothing and the GRU
    computes exactly the pre-trained update (only the query lacks the
    ``W s_{t-1}`` term, which Eq. 5 has no place for; with ``query_state=True``
    the warm-started model computes exactly the RNNsearch it comes from);
    gradients reach them at once (they depend on ``r``, which is not zero) and
    the memory parameters from the second step on, as with a zero-initialized
    adapter.
    ``"initializer"`` draws them from their initializers like any fresh layer,
    which adds an untrained random signal to the GRU input and the query.
    """
    check_choice("new_weights", new_weights, ("zeros", "initializer"))
    config = rnnsearch.get_config()
    for key in ("name", "trainable", "dtype", "feedback_attention"):
        config.pop(key, None)
    memdec = MemDec(**{**config, **memdec_kwargs})
    rnnsearch.build_weights()
    memdec.build_weights()
    src, dst = rnnsearch.cell, memdec.cell
    for a, b in (
        (rnnsearch.encoder, memdec.encoder),
        (rnnsearch.target_embedding, memdec.target_embedding),
        (src.init_dense, dst.init_dense),
        (src.attention, dst.attention),
        (src.deep_output, dst.deep_output),
    ):
        b.set_weights(a.get_weights())
    kernel, recurrent, bias = src.gru_cell.get_weights()
    new_kernel = dst.gru_cell.get_weights()[0]
    new_kernel[: kernel.shape[0]] = kernel  # rows [e; c]
    if new_weights == "zeros":
        new_kernel[kernel.shape[0] :] = 0.0  # rows r
    dst.gru_cell.set_weights([new_kernel, recurrent, bias])
    if src.query_dense is not None:
        q_kernel, q_bias = src.query_dense.get_weights()  # rows [s (units); e (E)]
        new_q, _ = dst.query_dense.get_weights()  # rows [r (m); e (E)] or [r; s; e]
        copied = q_kernel.shape[0] if dst.query_state else q_kernel.shape[0] - src.units
        new_q[-copied:] = q_kernel[-copied:]
        if new_weights == "zeros":
            new_q[:-copied] = 0.0  # W^r
        dst.query_dense.set_weights([new_q, q_bias])
    return memdec
