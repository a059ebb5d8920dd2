"""
Title: Transformer-tiny on Multi30k
Author: keras_memnmt
Description: A small Transformer (Vaswani et al. 2017) in Wu et al. (2021)'s setting for Multi30k, with `model.fit`.
Preset: multi30k_transformer_tiny (its numbers: keras_memnmt/recipes/multi30k_transformer_tiny.py)

## Introduction

Vaswani et al. (2017) translate with attention alone: self-attention layers in the
encoder and the decoder, and attention from the decoder over the encoder's output. Wu et
al. (2021) report a Transformer-tiny for Multi30k's size (4 layers, d 128, 4 heads, one
joint vocabulary whose embeddings are shared), trained with Adam and a warm-up schedule
on batches of 4,096 tokens; the preset keeps that setting (`--preset
multi30k_transformer_tiny_published` trains at the published command: 8,192 tokens per
update and the fork's defaults).

This program trains the library's `Transformer` with plain Keras: the `tf.data`
pipeline, `model.compile`, and `model.fit` with its callbacks are all here, and every
number comes from the preset `multi30k_transformer_tiny`, so that the program trains as
`memnmt train multi30k_transformer_tiny` does (the same seed gives the same losses).

## Run it

    python recipes/transformer_tiny.py --data-dir $MEMNMT_DATA --out runs/transformer_tiny

`--set KEY=VALUE` changes any setting of the preset, as `memnmt train --set` does;
`--epochs N` and `--steps N` shorten the run; with no Multi30k at hand,
`--set corpus=synthetic` trains on the library's synthetic corpus.
"""

import json
import os

import keras

from keras_memnmt.evaluation.translation import score, translate
from keras_memnmt.export import export_translator
from keras_memnmt.models import Transformer
from keras_memnmt.recipes import load_recipe
from keras_memnmt.training import (
    BleuValidation,
    compile_arguments,
    program_config,
    program_data,
    program_parser,
)


def main(argv=None) -> dict:
    presets = ("multi30k_transformer_tiny_published",)  # the published command's settings, --preset
    args = program_parser("multi30k_transformer_tiny", __doc__, presets=presets).parse_args(argv)
    out = args.out

    # 1. The settings: the preset's, with --set, --epochs and --steps; one seed draws the
    #    initial weights, the dropout masks and every epoch's order of batches.
    config = program_config(load_recipe(args.preset), args)
    keras.utils.set_random_seed(config.seed)

    # 2. The data: Multi30k (--data-dir or $MEMNMT_DATA), a SentencePiece vocabulary, and
    #    `tf.data` batches of similar lengths, ((source, target_in), target_out), padded with 0.
    data = program_data(config, args.data_dir, out)

    # 3. The model: a pre-norm Transformer encoder and decoder (keras-hub's layers) with
    #    shared embeddings, at the preset's sizes.
    model = Transformer(data.source_vocab_size, data.target_vocab_size, **config.init_options())

    # 4. Compile: the preset's optimizer and learning-rate schedule, gradient clipping, and
    #    the cross-entropy over the real (not padding) target tokens with label smoothing.
    model.compile(**compile_arguments(config))

    # 5. Train. The library's validation callback translates the validation set (greedy)
    #    at each epoch's end, logs val_bleu, saves OUT/best.keras when it improves (and
    #    OUT/checkpoints/step{N}.keras with keep_checkpoints) and applies the preset's
    #    plateau schedule (lr_decay after lr_patience epochs without a gain); Keras's
    #    EarlyStopping stops after `patience` such epochs (0: never).
    model.fit(
        data.train,
        validation_data=data.val,
        epochs=data.epochs,
        steps_per_epoch=data.steps_per_epoch,
        shuffle=False,  # the pipeline shuffles: each epoch in an order drawn from (seed, epoch)
        callbacks=[
            keras.callbacks.TensorBoard(os.path.join(out, "tensorboard")),
            BleuValidation(
                data.vocab,
                data.val_pairs.source,
                data.val_pairs.target,
                out,
                lr_decay=config.lr_decay,
                lr_patience=config.lr_patience,
                min_lr=config.min_lr,
                max_steps=data.last_step,
                patience=0,
                keep_checkpoints=config.keep_checkpoints,
            ),
            keras.callbacks.ModelCheckpoint(os.path.join(out, "last.keras")),
            keras.callbacks.EarlyStopping(monitor="val_bleu", mode="max", patience=config.patience or data.epochs),
        ],
    )

    # 6. Test: the best model translates the test set with beam search; sacreBLEU scores it.
    best = keras.saving.load_model(os.path.join(out, "best.keras"))
    translations = translate(best, data.vocab, data.test_pairs.source, **config.test_search())
    results = score(translations, data.test_pairs.target)
    print(json.dumps(results, indent=1))

    # 7. Export: a SavedModel that translates strings (TensorFlow Serving, tf.saved_model.load).
    if not args.no_export:
        export_translator(best, data.vocab, os.path.join(out, "export"), **config.test_search(), overwrite=True)
    return results


if __name__ == "__main__":
    main()
