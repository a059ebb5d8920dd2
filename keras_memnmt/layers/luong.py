"""The Luong decoder cell (Luong, Pham & Manning 2015; Bradbury & Socher 2016 §2): a stacked
LSTM with global attention over the source and input feeding."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers import sublayers
from keras_memnmt.layers._checks import check_bool
from keras_memnmt.layers.base import EncoderOutput
from keras_memnmt.layers.stacked import StackedLSTMCell


@keras.saving.register_keras_serializable(package="keras_memnmt")
class LuongCell(StackedLSTMCell):
    """Luong global attention decoder step with input feeding (Bradbury & Socher 2016, §2;
    Luong et al. 2015, Eq. 5-8 and §3.3).

    One step, given the embedding ``e = w^out_{t-1}`` of the previous target word and the
    previous attentional vector ``h̃_{t-1}``:

        1. stack      x^1 = [e; h̃_{t-1}] (input feeding; ``x^1 = e`` without it),
                      h^l_t, k^l_t = LSTM_l(x^l, (h^l_{t-1}, k^l_{t-1})),
                      x^{l+1} = dropout(h^l_t);  h_t = dropout(h^L_t)
        2. attention  score(h_t, e_s) = h_t . e_s ("dot", Bradbury & Socher's MetaMind system),
                      h_t W_a e_s ("general") or v_a . tanh(W_a [h_t; e_s]) ("concat")
                      alpha_t = softmax_s score,  κ_t = sum_s alpha_ts e_s
        3. output     h̃_t = tanh(W_att [h_t; κ_t])   (Bradbury & Socher; Luong's Eq. 5)
        4. softmax    logits = W_out dropout(h̃_t) + b   (the readout, no hidden layer)

    ``input_side`` (the bottom LSTM's product with ``e``) and ``_recurrent_step`` are the
    only place these equations live: ``_step`` composes them for ``step``, ``step_details``
    and the greedy and beam searches, and ``keras.layers.RNN`` (teacher forcing) runs
    ``_recurrent_step`` on ``project_inputs`` (the input side of the whole sequence at once).

    Decisions where the printed text is unclear:

    - **h̃_0**: "at the first timestep, the decoder LSTM receives as input an
      initialization word vector" (bos's embedding); the fed ``h̃_0`` is the zero vector.
    - **W_att has no bias**, as printed (``tanh(W_att [h_t; κ_t])``); the softmax has one.
    - **The size of h̃_t** is ``readout_units`` (Luong: the LSTM size). With tied output
      (``tied_output``) the softmax reads ``h̃_t`` through the target embedding matrix, so
      ``readout_units`` equals the embedding size.
    - **Dropout** (Luong: between the LSTM layers; Bradbury & Socher: 0.2): ``layer_dropout`` on each
      layer's output, one mask per sequence drawn when the states are made and carried in
      the state; on the top one too by default (``layer_dropout_on_top=True``), so the
      attention's query is dropped in training only; ``layer_dropout_on_top=False`` drops
      between layers only, as Luong et al. and OpenNMT-py do. ``output_dropout`` on ``h̃_t``
      before the softmax only: the next step is fed the undropped ``h̃_t``.
    - **Initial states**: ``init_state="encoder"`` (default; "c_0 and h_0 for each layer are
      initialized to the last states for each layer of the encoder") or ``"zeros"``.
    - ``input_feeding=False`` gives Luong's model without input feeding (his Table 1 ablation).
    - **Mixed precision**: the attention softmax is computed in float32; the rest, the
      states included, in the compute dtype.

    States (all 2-D)::

        [h̃ (readout_units), h^1, k^1, ..., h^L, k^L (units each), dropout masks (L*units),
         annotations (Tx*D), source keys (Tx*S), source mask (Tx)]

    Args:
        units: int, LSTM size of every layer.
        target_vocab_size: int, number of logits.
        readout_units: int, size of the attentional vector ``h̃_t``.
        annotation_units: int, size ``D`` of an annotation.
        num_layers: int, stacked LSTM layers (Bradbury & Socher: 4).
        score: "dot" (default), "general" or "concat".
        concat_units: int, the "concat" score's hidden size (None otherwise).
        input_feeding: bool, feed ``h̃_{t-1}`` to the bottom layer (default True).
        layer_dropout: float in [0, 1), dropout between layers (and on the top output, see
            ``StackedLSTMCell``'s ``layer_dropout_on_top``).
        init_state: "encoder" (default) or "zeros".
        attention_remat: bool, passed to ``LuongAttention`` ("concat" only).
        **kwargs: the ``DecoderCell`` arguments and ``keras.layers.Layer``'s.

    Call arguments: ``inputs (B, E)``, the states above, ``training``.

    Returns (``call``): ``(h̃_t (B, readout_units), new_states)``; (``step``): the same plus
    the source attention ``(B, Tx)``.

    Example:

        cell = LuongCell(units=512, target_vocab_size=8000, readout_units=256,
                         annotation_units=512, num_layers=2)
        rnn = keras.layers.RNN(cell, return_sequences=True)
    """

    def __init__(
        self,
        units: int,
        target_vocab_size: int,
        readout_units: int,
        annotation_units: int,
        num_layers: int = 4,
        score: str = "dot",
        concat_units: int | None = None,
        input_feeding: bool = True,
        layer_dropout: float = 0.0,
        init_state: str = "encoder",
        attention_remat: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            units,
            target_vocab_size,
            readout_units,
            annotation_units,
            num_layers=num_layers,
            score=score,
            concat_units=concat_units,
            layer_dropout=layer_dropout,
            init_state=init_state,
            attention_remat=attention_remat,
            **kwargs,
        )
        self.input_feeding = check_bool("input_feeding", input_feeding)
        self.attentional = sublayers.dense(self, self.readout_units, "attentional", use_bias=False)  # W_att
        self.deep_output = sublayers.deep_output(self, self.seed, hidden_layer=False)  # W_out

    @property
    def state_size(self) -> list:
        return [self.readout_units, *self.stack_state_size, None, None, None]

    def compute_output_size(self, embedding_dim: int) -> int:
        """``readout_units``: ``h̃_t``."""
        return self.readout_units

    def build(self, input_shape: tuple) -> None:
        embedding_dim = self.set_embedding_dim(input_shape)
        self.build_stack(embedding_dim + (self.readout_units if self.input_feeding else 0))
        self.attentional.build((None, self.units + self.annotation_units))
        self.deep_output.build((None, self.readout_units))
        self.built = True

    def initial_states_from(self, encoded: EncoderOutput, training: bool = False) -> list:
        """The states of the class docstring; ``h̃_0 = 0``."""
        stack, source = self.stack_initial_states(encoded, training=training)
        fed = ops.zeros((ops.shape(source[2])[0], self.readout_units), self.compute_dtype)
        return [fed, *stack, *source]

    def _recurrent_step(self, inputs: Any, products: Any, states: list, training: bool = False) -> tuple:
        """One decoder step (the equations of the class docstring) given ``products =
        input_side(inputs)`` (the bottom LSTM's product with ``e``): ``(h̃_t, states,
        details)``, details "attention" ``alpha_t (B, Tx)``."""
        layers = 2 * self.num_layers
        fed, lstm_states, masks, source = states[0], states[1 : layers + 1], states[layers + 1], states[layers + 2 :]
        # 1. x^1 = [e; h̃_{t-1}]: e's rows in `products`, h̃_{t-1}'s here
        top, lstm_states = self.run_stack(products, lstm_states, masks, bottom_rest=fed if self.input_feeding else None)
        context, attention = self.attend_source(top, source)  # 2. κ_t (B, D), alpha_t (B, Tx)
        attentional = self.attentional(ops.concatenate([top, context], axis=-1))  # 3. h̃_t
        return attentional, [attentional, *lstm_states, masks, *source], {"attention": attention}

    def get_config(self) -> dict:
        return {**super().get_config(), "input_feeding": self.input_feeding}
