"""A tiny serializable model around a decoder cell, for tests.

It exercises the cell contract the recurrent models rely on (`RecurrentEncoderDecoder.call`):
`initial_states` from an `EncoderOutput` outside the loop (with the `training`
flag), `drop_inputs` and `prepare_inputs` on the target embeddings, the cell inside
`keras.layers.RNN(return_sequences=True)`, `readout` on the whole sequence,
`fit`, and `.keras` save/load.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from keras_memnmt.layers.base import EncoderOutput


@keras.saving.register_keras_serializable(package="keras_memnmt_testing")
class TinyDecoderModel(keras.Model):
    """Source embeddings as annotations + a decoder cell; logits for every target step.

    Encoder stand-in: `annotations = Embedding(source)` (`D = cell.annotation_units`),
    `summary = annotations[:, 0]`, `source_mask = source != 0`.

    Args:
        cell: a `DecoderCell` (`initial_states`, `drop_inputs`, `readout`,
            `annotation_units`, `target_vocab_size`).
        source_vocab_size: int.
        embedding_dim: int, target embedding size `E`.
        **kwargs: base `keras.Model` arguments.

    Call arguments:
        inputs: dict with "source" `(B, Tx)` and "target" `(B, T)` int ids.
        training: bool.

    Returns:
        `(B, T, target_vocab_size)` logits.
    """

    def __init__(self, cell: keras.layers.Layer, source_vocab_size: int, embedding_dim: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source_vocab_size = source_vocab_size
        self.embedding_dim = embedding_dim
        self.source_embedding = keras.layers.Embedding(
            source_vocab_size, cell.annotation_units, name="source_embedding"
        )
        self.target_embedding = keras.layers.Embedding(cell.target_vocab_size, embedding_dim, name="target_embedding")
        self.decoder = keras.layers.RNN(cell, return_sequences=True, name="decoder")

    def call(self, inputs: dict, training: bool = False) -> Any:
        source = inputs["source"]
        cell = self.decoder.cell
        source_mask = ops.cast(ops.not_equal(source, 0), "float32")  # (B, Tx)
        annotations = self.source_embedding(source)  # (B, Tx, D)
        encoded = EncoderOutput(annotations, source_mask, annotations[:, 0])
        states = cell.initial_states(encoded, training=training)
        embedded = self.target_embedding(inputs["target"])  # (B, T, E)
        embedded = cell.drop_inputs(embedded, training=training)
        inputs = cell.project_inputs(cell.prepare_inputs(embedded, inputs["target"]))
        with cell.outside_the_loop():
            outputs = self.decoder(inputs, initial_state=states, training=training)
        return cell.readout(outputs, training=training)  # (B, T, V)

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "cell": keras.saving.serialize_keras_object(self.decoder.cell),
                "source_vocab_size": self.source_vocab_size,
                "embedding_dim": self.embedding_dim,
            }
        )
        return config

    @classmethod
    def from_config(cls, config: dict) -> TinyDecoderModel:
        config = dict(config)
        config["cell"] = keras.saving.deserialize_keras_object(config["cell"])
        return cls(**config)
