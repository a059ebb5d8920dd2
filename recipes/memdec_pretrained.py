"""
Title: MemDec pre-trained from RNNsearch
Author: keras_memnmt
Description: Wang et al. (2016)'s memory-enhanced decoder started from a trained RNNsearch (§4.2), with two `model.fit`s.
Preset: multi30k_memdec (its numbers: keras_memnmt/recipes/multi30k_memdec.py)

## Introduction

Wang et al. (2016, §4.2) do not train MemDec from random weights: they train RNNsearch
first, copy its weights into MemDec (the embeddings, the encoder, the attention, the deep
output and the GRU's shared rows; the memory's new weights start at zero) and fine-tune
the whole. This program does both stages with plain Keras, each a `model.compile` and a
`model.fit` with the same callbacks, and every number comes from the preset
`multi30k_memdec`: its RNNsearch stage (`pretrain_epochs` epochs at the RNNsearch rate,
into OUT/pretrain_rnnsearch), then MemDec's fine-tuning (`epochs` epochs at 2.5e-4), as
`memnmt train multi30k_memdec` does. recipes/memdec.py trains MemDec from scratch.

## Run it

    python recipes/memdec_pretrained.py --data-dir $MEMNMT_DATA --out runs/memdec_pretrained
    python recipes/memdec_pretrained.py --set pretrain_epochs=5 --epochs 2 --set corpus=synthetic

`--set KEY=VALUE` changes any setting of the preset (`pretrain_epochs` and
`pretrain_learning_rate` too), as `memnmt train --set` does; `--epochs N` is MemDec's
epochs, `--steps N` bounds each stage's updates.
"""

import dataclasses
import json
import os

import keras

from keras_memnmt.evaluation.translation import score, translate
from keras_memnmt.export import export_translator
from keras_memnmt.models import MemDec, RNNsearch
from keras_memnmt.recipes import load_recipe, recipe_module, split_recipe_options
from keras_memnmt.recipes.multi30k_memdec import stage_config
from keras_memnmt.training import (
    BleuValidation,
    compile_arguments,
    program_config,
    program_data,
    program_parser,
)


def fit(model: keras.Model, config, data, out: str) -> keras.Model:
    """Compiles ``model`` and trains it on ``data`` into ``out``; returns its best.keras."""
    os.makedirs(out, exist_ok=True)
    model.compile(**compile_arguments(config))
    # The library's validation callback translates the validation set (greedy) at each
    # epoch's end, logs val_bleu, saves OUT/best.keras when it improves (and
    # OUT/checkpoints/step{N}.keras with keep_checkpoints) and applies the plateau schedule;
    # Keras's EarlyStopping stops after `patience` epochs without a gain (0: never).
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
    return keras.saving.load_model(os.path.join(out, "best.keras"))


def main(argv=None) -> dict:
    parser = program_parser("multi30k_memdec", __doc__)
    args = parser.parse_args(argv)
    out = args.out

    # 1. The settings: MemDec's (the preset, with --set, --epochs and --steps) and those of
    #    its RNNsearch stage (the same data and sizes; the preset's pretrain_epochs at
    #    pretrain_learning_rate).
    module = recipe_module(args.preset)
    options, args.set = split_recipe_options(module, args.set)  # pretrain_epochs, pretrain_learning_rate
    config = program_config(load_recipe(args.preset, module), args)
    if options.pretrain_epochs == 0:
        parser.error("pretrain_epochs=0 trains no RNNsearch: recipes/memdec.py trains MemDec from scratch")
    stage = stage_config(config, options)

    # 2. The data, once: both stages read the same batches with the same vocabulary.
    data = program_data(config, args.data_dir, out)

    # 3. Stage 1: RNNsearch (Bahdanau et al. 2014), trained for the stage's epochs. Each
    #    stage starts from the seed, as each stage of `memnmt train multi30k_memdec` does.
    keras.utils.set_random_seed(stage.seed)
    rnnsearch = RNNsearch(data.source_vocab_size, data.target_vocab_size, **stage.init_options())
    stage_data = dataclasses.replace(data, last_step=stage.max_steps or stage.epochs * data.steps_per_epoch)
    rnnsearch = fit(rnnsearch, stage, stage_data, os.path.join(out, "pretrain_rnnsearch"))

    # 4. Stage 2: MemDec with the best RNNsearch's weights (MemDec.warm_start: Wang et al.
    #    2016, §4.2), the memory's own weights new, then everything fine-tuned.
    keras.utils.set_random_seed(config.seed)
    model = MemDec.warm_start(rnnsearch, config.init_options(), **config.warm_start_options())
    best = fit(model, config, data, out)

    # 5. Test: the best MemDec translates the test set with beam search; sacreBLEU scores it.
    translations = translate(best, data.vocab, data.test_pairs.source, **config.test_search())
    results = score(translations, data.test_pairs.target)
    print(json.dumps(results, indent=1))

    # 6. Export: a SavedModel that translates strings (TensorFlow Serving, tf.saved_model.load).
    if not args.no_export:
        export_translator(best, data.vocab, os.path.join(out, "export"), **config.test_search(), overwrite=True)
    return results


if __name__ == "__main__":
    main()
