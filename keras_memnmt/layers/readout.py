"""The deep output ("readout") shared by the GRU decoder cells."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers._checks import check_bool, check_positive_int, check_rate


def clone_initializer(initializer: Any) -> keras.initializers.Initializer:
    """A fresh instance of `initializer`, so that sublayers never share one object."""
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())


@keras.saving.register_keras_serializable(package="keras_memnmt")
class DeepOutput(keras.layers.Layer):
    """Deep output layer: one tanh hidden layer, dropout, then vocabulary logits.

    MemDec Eq. 9 (Wang et al. 2016) / Bahdanau et al. 2014:

        score(y) = DNN([s_t; c_t; e_{y_{t-1}}])^T w_y                  (Eq. 9)
        t        = dropout(tanh(W_o [s_t; c_t; e_{y_{t-1}}] + b_o))
        logits   = t W_y + b_y

    Decisions: the DNN is a single tanh layer of `readout_units` (Bahdanau used
    a maxout layer; MemDec only says "DNN"); dropout (MemDec §4: "applied only
    on the output layer", rate 0.5) acts on `t` during training only. The
    caller builds the concatenation `[s_t; c_t; e]` — it is the decoder cell's
    per-step output — so the same code serves a whole teacher-forced sequence
    `(B, T, F)` and a single decoding step `(B, F)`.

    Tied output (`tied=True`, our option, not in the papers): `W_y` is the
    transposed target embedding matrix, `logits = t E^T + b_y` (weight tying,
    Press & Wolf 2017; nmtpytorch's `tied_emb` in its Multi30k systems). The
    embedding belongs to the model, so it comes in at call time as the
    `keras.layers.ReversibleEmbedding` whose `reverse=True` call computes `t E^T`;
    `readout_units` must equal the embedding size. Only `b_y` is this layer's.

    Without the hidden layer (`hidden_layer=False`, Luong et al. 2015's softmax on the
    attentional vector, which the cell computes): `t = dropout(inputs)`, whose size must
    be `readout_units`.

    Mixed precision: the logits are in the compute dtype; the loss
    (`MaskedCrossEntropy`) and the searches cast them to float32 before their softmax.

    Args:
        readout_units: int, size of the tanh hidden layer `t` (of the inputs, without it).
        target_vocab_size: int, number of logits.
        output_dropout: float in [0, 1), dropout rate on `t`.
        tied: bool, take `W_y` from the `output_embedding` call argument (above)
            instead of a kernel of its own.
        hidden_layer: bool, the tanh layer `W_o` (default); False: logits of the inputs.
        kernel_initializer: initializer of `W_o` and `W_y`.
        bias_initializer: initializer of `b_o` and `b_y`.
        seed: optional int, seed of the dropout.
        **kwargs: base `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(..., F)`, the decoder cell outputs.
        training: bool, whether dropout is active.
        output_embedding: with `tied=True` (only then), the target
            `keras.layers.ReversibleEmbedding` (`tie_weights=True`) of width
            `readout_units`.

    Returns:
        `(..., target_vocab_size)` unnormalized logits.

    Sublayers: `hidden` (Dense, tanh; `None` without the hidden layer), `dropout_layer`, `logits` (Dense; `None` when
    tied, which has the weight `logits_bias` instead).
    """

    def __init__(
        self,
        readout_units: int,
        target_vocab_size: int,
        output_dropout: float = 0.5,
        tied: bool = False,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        seed: int | None = None,
        hidden_layer: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.readout_units = check_positive_int("readout_units", readout_units)
        self.target_vocab_size = check_positive_int("target_vocab_size", target_vocab_size)
        self.output_dropout = check_rate("output_dropout", output_dropout)
        self.tied = check_bool("tied", tied)
        self.hidden_layer = check_bool("hidden_layer", hidden_layer)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        self.hidden = (
            None
            if not self.hidden_layer
            else keras.layers.Dense(
                self.readout_units,
                activation="tanh",
                kernel_initializer=clone_initializer(self.kernel_initializer),
                bias_initializer=clone_initializer(self.bias_initializer),
                dtype=self.dtype_policy,
                name="hidden",
            )
        )
        self.dropout_layer = keras.layers.Dropout(
            self.output_dropout, seed=seed, dtype=self.dtype_policy, name="dropout"
        )
        self.logits = (
            None
            if self.tied
            else keras.layers.Dense(
                self.target_vocab_size,
                kernel_initializer=clone_initializer(self.kernel_initializer),
                bias_initializer=clone_initializer(self.bias_initializer),
                dtype=self.dtype_policy,
                name="logits",
            )
        )

    def build(self, input_shape: tuple) -> None:
        if self.hidden is not None:
            self.hidden.build(tuple(input_shape))
        elif input_shape[-1] != self.readout_units:
            raise ValueError(
                f"without the hidden layer the inputs are the readout: readout_units="
                f"{self.readout_units}, got inputs of {input_shape[-1]} features"
            )
        if self.tied:
            self.logits_bias = self.add_weight(
                shape=(self.target_vocab_size,),
                initializer=clone_initializer(self.bias_initializer),
                name="logits_bias",
            )
        else:
            self.logits.build(tuple(input_shape[:-1]) + (self.readout_units,))
        self.built = True

    def call(self, inputs: Any, training: bool = False, output_embedding: Any = None) -> Any:
        if self.tied != (output_embedding is not None):
            raise ValueError(
                "a tied DeepOutput needs output_embedding (the target ReversibleEmbedding)"
                if self.tied
                else "output_embedding is only for a tied DeepOutput (tied=True)"
            )
        hidden = inputs if self.hidden is None else self.hidden(inputs)  # (..., readout_units)
        hidden = self.dropout_layer(hidden, training=training)
        if self.tied:  # t E^T + b_y
            return ops.add(output_embedding(hidden, reverse=True), self.logits_bias)
        return self.logits(hidden)  # (..., target_vocab_size)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        return tuple(input_shape[:-1]) + (self.target_vocab_size,)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "readout_units": self.readout_units,
                "target_vocab_size": self.target_vocab_size,
                "output_dropout": self.output_dropout,
                "tied": self.tied,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "seed": self.seed,
                "hidden_layer": self.hidden_layer,
            }
        )
        return config
