"""The Y-LSTM decoder cell (Bradbury & Socher 2016, §2.1): a target language model whose
tracker's states are replaced, at every step, by attention over the encoder's tracker states."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers import sublayers
from keras_memnmt.layers._checks import check_bool, check_choice
from keras_memnmt.layers.attention import LuongAttention
from keras_memnmt.layers.base import DecoderCell, EncoderOutput
from keras_memnmt.layers.readout import clone_initializer
from keras_memnmt.layers.tracked import TrackedStack

TRACKER_SCORES = ("dot", "general")


@keras.saving.register_keras_serializable(package="keras_memnmt")
class YLSTMCell(TrackedStack, DecoderCell):
    """Y-LSTM decoder step (Bradbury & Socher 2016, §2.1): the encoder's structure over the
    target, the tracker's states replaced by an attentional sum of the encoder's tracker states.

    One step, given the embedding ``e = w^out_{t-1}`` of the previous target word:

        1. stack    the :class:`~keras_memnmt.layers.tracked.TrackedStack` step with
                    x^1 = e: layer m reads [x^m; h̃^tracker_{t-1}], the tracker runs
                    h'_t, k'_t = LSTM_tracker(h^m_t, (h̃^tracker_{t-1}, c̃^tracker_{t-1}))
        2. attend   alpha_ts = softmax_s(h'_t . h^tracker_s)          (score "dot", printed)
                    h̃^tracker_t = sum_s alpha_ts h^tracker_s,  c̃^tracker_t = sum_s alpha_ts c^tracker_s
                    (run as soon as the tracker has; with ``same_step_context`` every layer
                    l > m then reads [x^l; h̃^tracker_t])
        3. output   h^L_t, read by the softmax (W_out h^L_t + b; the readout has no hidden layer);
                    with ``output_context``, o_t = tanh(W_c [h^L_t; h̃^tracker_t]) instead

    The attention is the only path from the source to the target: the decoder's LSTMs start
    from zeros, and ``(h̃^tracker, c̃^tracker)`` is what the next step's layer m and tracker read.

    Decisions where the printed text is unclear:

    - **The query** of ``score(h̃^tracker_t, h^tracker_s)`` cannot be the replaced state it
      defines: it is the tracker's own output ``h'_t`` at step t, and the replaced states
      become the tracker's recurrent state and layer m's extra input at step t+1. Replacing
      the tracker's input at step t instead (attention queried by the tracker's previous
      output, before it runs) is the same computation shifted by one step, so there is
      one reading, not two.
    - **The start**: ``(h̃^tracker_0, c̃^tracker_0)`` is the attention with equal scores, the
      mean of the encoder's tracker states over the real source positions; a zero start
      would leave the first target word without the source.
    - **Score**: the printed ``h_t h_s^T``, "dot" (default); "general" (``h_t W_a h_s^T``)
      as an option.
    - **When the layers above the tracker see the source** (``same_step_context``). As
      printed, the attention's result ``h̃^tracker_t`` reaches the decoder's LSTMs only at
      step t+1, through the tracker's state and layer m's input, so the word predicted at
      step t is chosen before the source attention of step t is read (default False, the
      paper's reading). ``same_step_context=True`` also feeds ``h̃^tracker_t`` to every
      layer above m in the same step (layer l > m reads ``[x^l; h̃^tracker_t]``), as an
      attentional decoder reads its context before it predicts; it needs
      ``tracker_layer < num_layers``. docs/decisions.md gives the measured effect of each reading.
    - **Dropout** (paper: 0.2): ``layer_dropout`` between layers and on the top output, one
      mask per sequence carried in the state; ``output_dropout`` before the softmax. The
      tracker reads layer m's output as the layer above does, after its mask (default);
      ``tracker_reads_masked=False`` gives it the output before the mask (the paper
      names dropout between layers only; the tracker is not a layer of the stack).
    - **The softmax's input** (``output_context``): as printed, ``h^L_t`` alone (default
      False). ``output_context=True`` gives the softmax Luong et al. 2015's attentional
      hidden state (their Eq. 5), ``o_t = tanh(W_c [h^L_t; h̃^tracker_t])``, ``units`` wide,
      so that the step's attention reaches the word it predicts; an option of this
      library, not of the paper.
    - **Mixed precision**: the attention softmax and the start's mean are computed in
      float32; the rest, the states included, in the compute dtype.

    States (all 2-D)::

        [h^1, k^1, ..., h^L, k^L (units each), h̃^tracker, c̃^tracker (tracker_units each),
         dropout masks (L*units), encoder tracker states [H; C] (Tx*2*tracker_units),
         attention keys (Tx*tracker_units), source mask (Tx)]

    Args:
        units: int, LSTM size of every layer (and of the softmax's input).
        target_vocab_size: int, number of logits.
        readout_units: int, must equal ``units`` (the softmax reads ``h^L_t``).
        annotation_units: int, ``2 * tracker_units``: the encoder hands over ``[H; C]``.
        num_layers: int, stacked layers (paper: 5).
        tracker_layer: int, the layer (1-based) the tracker is attached to (paper: 3).
        tracker_units: int or None, the tracker's size (None: ``units``).
        score: "dot" (default) or "general".
        layer_dropout: float in [0, 1).
        same_step_context: bool, feed the attention's result to the layers above m in the same step.
        tracker_reads_masked: bool, the tracker reads layer m's output after its dropout mask
            (default True) or before it.
        output_context: bool, the softmax reads ``tanh(W_c [h^L_t; h̃^tracker_t])`` instead of
            ``h^L_t`` (default False).
        **kwargs: the ``DecoderCell`` arguments and ``keras.layers.Layer``'s.

    Returns (``call``): ``(h^L_t (B, units), new_states)``; (``step``): the same plus the
    attention ``(B, Tx)`` over the encoder's tracker states.
    """

    def __init__(
        self,
        units: int,
        target_vocab_size: int,
        readout_units: int,
        annotation_units: int,
        num_layers: int = 5,
        tracker_layer: int = 3,
        tracker_units: int | None = None,
        score: str = "dot",
        layer_dropout: float = 0.0,
        same_step_context: bool = False,
        tracker_reads_masked: bool = True,
        output_context: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(units, target_vocab_size, readout_units, annotation_units, **kwargs)
        self.init_tracked_stack(num_layers, tracker_layer, tracker_units, layer_dropout, tracker_reads_masked)
        self.output_context = check_bool("output_context", output_context)
        if self.readout_units != self.units:
            raise ValueError(
                f"the softmax reads h^L_t: `readout_units` must equal `units`, got "
                f"readout_units={readout_units}, units={units}"
            )
        if self.annotation_units != 2 * self.tracker_units:
            raise ValueError(
                f"the encoder hands over [H; C] of its tracker: `annotation_units` must be "
                f"2 * tracker_units = {2 * self.tracker_units}, got annotation_units={annotation_units}"
            )
        self.score = check_choice("score", score, TRACKER_SCORES)
        self.same_step_context = check_bool("same_step_context", same_step_context)
        if self.same_step_context and self.tracker_layer == self.num_layers:
            raise ValueError(
                f"`same_step_context`=True feeds the layers above the tracker's, but the tracker is "
                f"on the top layer (tracker_layer={tracker_layer}, num_layers={num_layers})"
            )
        self.tracker_attention = LuongAttention(
            self.score,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="tracker_attention",
        )
        # W_c (Luong et al. 2015, Eq. 5: no bias), with output_context only.
        self.context_output = (
            sublayers.dense(self, self.units, "context_output", use_bias=False) if self.output_context else None
        )
        self.deep_output = sublayers.deep_output(self, self.seed, hidden_layer=False)  # W_out

    @property
    def state_size(self) -> list:
        return [*self.tracked_state_size, None, None, None]

    def compute_output_size(self, embedding_dim: int) -> int:
        return self.units

    def _build_attention(self) -> None:
        if not self.tracker_attention.built:
            self.tracker_attention.build((None, self.tracker_units), (None, None, self.tracker_units))

    def build(self, input_shape: tuple) -> None:
        self.build_tracked_stack(
            self.set_embedding_dim(input_shape), above_tracker=self.tracker_units if self.same_step_context else 0
        )
        self._build_attention()
        if self.context_output is not None:
            self.context_output.build((None, self.units + self.tracker_units))
        self.deep_output.build((None, self.units))
        self.built = True

    def initial_states_from(self, encoded: EncoderOutput, training: bool = False) -> list:
        """Zero LSTM states, the tracker's start (the mean of ``H`` and ``C``), the masks and the
        encoder's tracker states."""
        self._build_attention()
        dtype = self.compute_dtype
        annotations = ops.cast(encoded.annotations, dtype)  # (B, Tx, 2T) = [H; C]
        mask = ops.cast(encoded.mask, dtype)
        batch = ops.shape(annotations)[0]
        start = self.masked_mean(annotations, mask)  # equal scores: [mean H; mean C]
        tracker = [start[:, : self.tracker_units], start[:, self.tracker_units :]]
        keys = ops.cast(self.tracker_attention.precompute_keys(annotations[..., : self.tracker_units]), dtype)
        lstm_states = [ops.zeros((batch, self.units), dtype)] * (2 * self.num_layers)
        return [
            *lstm_states,
            *tracker,
            self.layer_masks(batch, training=training),
            self.flatten(annotations),
            self.flatten(keys),
            mask,
        ]

    @property
    def projection_size(self) -> int:
        """``4 units``: the bottom LSTM's input kernel rows for ``e``, with its bias."""
        return 4 * self.units

    def input_side(self, inputs: Any) -> Any:
        """``W^1_e e + b^1``, the bottom LSTM's product with the word embedding:
        ``(B, [T,] E)`` to ``(B, [T,] 4 units)``."""
        bottom = self.lstms[0]
        return self.rows_product(inputs, bottom.kernel, 0, self._embedding_dim, bias=bottom.bias)

    def loop_weights(self) -> dict:
        """The bottom LSTM's kernel rows for the tracker state (when the tracker is attached to it)."""
        if self.tracker_layer != 1:
            return {}
        return {"bottom_tracker": self.kernel_rows(self.lstms[0].kernel, self._embedding_dim)}

    def _recurrent_step(self, inputs: Any, products: Any, states: list, training: bool = False) -> tuple:
        """One decoder step (the class docstring) given ``products = input_side(inputs)``:
        ``(h^L_t, states, details)``, details "attention" ``alpha_t (B, Tx)``, the tracker
        attention over the source positions."""
        layers = 2 * self.num_layers
        tracker, masks = states[layers : layers + 2], states[layers + 2]
        annotations_flat, keys_flat, source_mask = states[layers + 3 :]
        annotations = self.unflatten(annotations_flat, source_mask, 2 * self.tracker_units)
        keys = self.unflatten(keys_flat, source_mask, self.tracker_units)
        attended = {}

        def attend(query: Any) -> Any:  # 2., queried by the tracker's output h'_t
            attended["replaced"], attended["attention"] = self.tracker_attention(
                query, keys, annotations, mask=source_mask
            )
            return attended["replaced"][:, : self.tracker_units] if self.same_step_context else None

        top, lstm_states, _ = self.tracked_step(
            inputs, states[:layers], tracker, masks, bottom_product=products, after_tracker=attend
        )  # 1.
        replaced, attention = attended["replaced"], attended["attention"]
        tracker = [replaced[:, : self.tracker_units], replaced[:, self.tracker_units :]]
        new_states = [*lstm_states, *tracker, masks, annotations_flat, keys_flat, source_mask]
        if self.context_output is not None:  # 3., o_t = tanh(W_c [h^L_t; h~^tracker_t])
            top = self.context_output(ops.concatenate([top, tracker[0]], axis=-1))
        return top, new_states, {"attention": attention}

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            **self.tracked_config(),
            "score": self.score,
            "same_step_context": self.same_step_context,
            "output_context": self.output_context,
        }
