"""The stacked-LSTM decoder with Luong attention over the source, shared by the Luong and
Attentive NMT cells (their states, their stack and their source attention)."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers import sublayers
from keras_memnmt.layers._checks import check_bool, check_choice, check_positive_int, check_rate
from keras_memnmt.layers.attention import LUONG_SCORES, LuongAttention
from keras_memnmt.layers.base import DecoderCell, EncoderOutput
from keras_memnmt.layers.readout import clone_initializer

INIT_STATES = ("encoder", "zeros")


class StackedLSTMCell(DecoderCell):
    """Base of the stacked-LSTM cells: ``num_layers`` LSTMs (``lstm_{i}``), dropout between
    them, and Luong attention (``source_attention``) read by the top state.

    The pieces a subclass's ``step`` uses:

    - :meth:`stack_initial_states`: the LSTMs' ``[h^1, k^1, ..., h^L, k^L]``, from the
      encoder's layer ``l`` final ``[h, c]`` (``init_state="encoder"``, Luong's hand-off; the
      encoder must have as many layers of ``units``, else a ``ValueError`` naming both) or
      zeros; the dropout masks ``(B, L*units)``, drawn once per sequence in training
      (ones otherwise); and the source memory ``[annotations, keys, mask]``.
    - :meth:`input_side`: the bottom LSTM's product with the word embedding, computed
      for the whole sequence before the loop in training.
    - :meth:`run_stack`: one step of the stack; each layer's output is multiplied by its
      dropout mask before it feeds the layer above (the top output too, unless
      ``layer_dropout_on_top=False``), so the non-recurrent connections are dropped with
      the same mask at every step.
    - :meth:`attend_source`: ``(c_t, alpha_t)`` of the source attention queried by the top
      state.

    Mixed precision: the source attention's softmax is computed in float32
    (``LuongAttention``); the LSTMs, the masks and the states in the compute dtype.

    Args:
        units: int, LSTM size of every layer.
        target_vocab_size, readout_units, annotation_units: see :class:`DecoderCell`.
        num_layers: int, stacked LSTM layers.
        score: "dot", "general" or "concat", the source score (Luong et al. 2015, Eq. 8).
        concat_units: int, the "concat" score's hidden size (None otherwise).
        layer_dropout: float in [0, 1), dropout between layers (and on the top output with
            ``layer_dropout_on_top``).
        layer_dropout_on_top: bool, drop the top layer's output too (default True), before
            the attention reads it; False drops only between layers, as Luong et al. and
            OpenNMT do.
        init_state: "encoder" (default) or "zeros".
        attention_remat: bool, passed to ``LuongAttention`` ("concat" only).
        **kwargs: the ``DecoderCell`` arguments and ``keras.layers.Layer``'s.
    """

    def __init__(
        self,
        units: int,
        target_vocab_size: int,
        readout_units: int,
        annotation_units: int,
        num_layers: int = 2,
        score: str = "general",
        concat_units: int | None = None,
        layer_dropout: float = 0.0,
        init_state: str = "encoder",
        attention_remat: bool = True,
        layer_dropout_on_top: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(units, target_vocab_size, readout_units, annotation_units, **kwargs)
        self.layer_dropout_on_top = check_bool("layer_dropout_on_top", layer_dropout_on_top)
        self.num_layers = check_positive_int("num_layers", num_layers)
        self.score = check_choice("score", score, LUONG_SCORES)
        if score == "dot" and self.annotation_units != self.units:
            raise ValueError(
                f"`score`='dot' needs annotation_units == units, got annotation_units="
                f"{self.annotation_units}, units={self.units}"
            )
        self.concat_units = concat_units
        self.layer_dropout = check_rate("layer_dropout", layer_dropout)
        self.init_state = check_choice("init_state", init_state, INIT_STATES)
        self.attention_remat = bool(attention_remat)
        self.lstms = [sublayers.lstm_cell(self, f"lstm_{i}") for i in range(self.num_layers)]
        self.source_attention = LuongAttention(
            self.score,
            units=concat_units,
            rematerialize=self.attention_remat,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="source_attention",
        )

    @property
    def source_key_units(self) -> int:
        if self.score == "dot":
            return self.annotation_units
        return self.units if self.score == "general" else self.concat_units

    @property
    def stack_state_size(self) -> list:
        """``[h^1, k^1, ..., h^L, k^L, masks]``."""
        return [self.units] * (2 * self.num_layers) + [self.num_layers * self.units]

    # ----------------------------------------------------------------- build
    def build_source_side(self) -> None:
        """Builds the source attention (before the states are made, which use its keys)."""
        if not self.source_attention.built:
            self.source_attention.build((None, self.units), (None, None, self.annotation_units))

    def build_stack(self, input_dim: int) -> None:
        """Builds the LSTMs, the bottom one for inputs of ``input_dim`` features."""
        self.build_source_side()
        for i, lstm in enumerate(self.lstms):
            lstm.build((None, input_dim if i == 0 else self.units))

    # --------------------------------------------------------------- states
    def stack_initial_states(self, encoded: EncoderOutput, training: bool = False) -> tuple:
        """``(lstm_states + [masks], [annotations, keys, mask])``, 2-D each (class docstring)."""
        self.build_source_side()
        dtype = self.compute_dtype
        annotations = ops.cast(encoded.annotations, dtype)
        mask = ops.cast(encoded.mask, dtype)
        batch = ops.shape(annotations)[0]
        if self.init_state == "encoder":
            layers = encoded.final_states
            shapes = [[int(s.shape[-1]) for s in layer] for layer in layers]
            if len(layers) != self.num_layers or any(s != [self.units, self.units] for s in shapes):
                raise ValueError(
                    f"init_state='encoder' needs the encoder's final [h, c] of {self.units} units for "
                    f"each of the decoder's {self.num_layers} layers; the encoder hands over {shapes} "
                    "(pass init_state='zeros' or match the sizes)"
                )
            lstm_states = [ops.cast(s, dtype) for layer in layers for s in layer]
        else:
            lstm_states = [ops.zeros((batch, self.units), dtype)] * (2 * self.num_layers)
        masks = ops.ones((batch, self.num_layers * self.units), dtype)
        if training and self.layer_dropout > 0.0:
            masks = keras.random.dropout(masks, self.layer_dropout, seed=self.seed_generator)
        keys = ops.cast(self.source_attention.precompute_keys(annotations), dtype)
        return [*lstm_states, masks], [self.flatten(annotations), self.flatten(keys), mask]

    # ----------------------------------------------------------------- step
    @property
    def projection_size(self) -> int:
        """``4 units``: the bottom LSTM's input kernel rows for ``e``, with its bias."""
        return 4 * self.units

    def input_side(self, inputs: Any) -> Any:
        """``W^1_e e + b^1``, the bottom LSTM's product with the word embedding (its input
        starts with ``e``): ``(B, [T,] E)`` to ``(B, [T,] 4 units)``."""
        bottom = self.lstms[0]
        return self.rows_product(inputs, bottom.kernel, 0, self._embedding_dim, bias=bottom.bias)

    def loop_weights(self) -> dict:
        """The bottom LSTM's kernel rows after ``e`` (what it reads besides the word; Luong's
        fed ``h̃_{t-1}``), when it reads more than ``e``."""
        bottom = self.lstms[0]
        if int(bottom.kernel.shape[0]) == self._embedding_dim:
            return {}
        return {"bottom_rest": self.kernel_rows(bottom.kernel, self._embedding_dim)}

    def run_stack(self, products: Any, lstm_states: list, masks: Any, bottom_rest: Any = None) -> tuple:
        """One step of the stack: ``(top (B, units), new lstm states)``.

        Args:
            products: ``input_side(e)``, the bottom LSTM's product with ``e``.
            lstm_states: ``[h^1, k^1, ..., h^L, k^L]``.
            masks: the ``(B, L*units)`` dropout masks.
            bottom_rest: what the bottom LSTM reads after ``e`` (Luong's fed ``h̃_{t-1}``),
                or None.
        """
        new_states, x = [], None
        for i, lstm in enumerate(self.lstms):
            states = [lstm_states[2 * i], lstm_states[2 * i + 1]]
            if i == 0:
                if bottom_rest is not None:
                    products = products + ops.matmul(bottom_rest, self.step_weights()["bottom_rest"])
                h, (_, c) = lstm.step_from_input_product(products, states)
            else:
                h, (_, c) = lstm(x, states)
            new_states += [h, c]
            x = (
                h
                if i == self.num_layers - 1 and not self.layer_dropout_on_top
                else (h * masks[:, i * self.units : (i + 1) * self.units])
            )
        return x, new_states

    def attend_source(self, top: Any, source: list) -> tuple:
        """``(c_t (B, D), alpha_t (B, Tx))`` of the source attention from the top state."""
        annotations_flat, keys_flat, source_mask = source
        annotations = self.unflatten(annotations_flat, source_mask, self.annotation_units)
        source_keys = self.unflatten(keys_flat, source_mask, self.source_key_units)
        return self.source_attention(top, source_keys, annotations, mask=source_mask)

    # ---------------------------------------------------------------- config
    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "num_layers": self.num_layers,
            "score": self.score,
            "concat_units": self.concat_units,
            "layer_dropout": self.layer_dropout,
            "init_state": self.init_state,
            "attention_remat": self.attention_remat,
            "layer_dropout_on_top": self.layer_dropout_on_top,
        }
