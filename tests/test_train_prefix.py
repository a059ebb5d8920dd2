"""``TrainConfig.train_prefix``: training pairs from files, val and test from the corpus."""

import gzip
import json
import os
import shutil

import pytest

from keras_memnmt.config import TrainConfig, apply_overrides
from keras_memnmt.data import CorpusError, synthetic_splits
from keras_memnmt.data.stream import sample_pairs
from keras_memnmt.training import load_corpora

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent

PAIRS = [("a dog runs", "ein Hund rennt"), ("two cats", "zwei Katzen"), ("a bird", "ein Vogel")]


def write_pairs(prefix, pairs=PAIRS, gz_lang=None):
    for i, lang in enumerate(("en", "de")):
        text = "".join(pair[i] + "\n" for pair in pairs).encode("utf-8")
        if lang == gz_lang:
            with gzip.open(f"{prefix}.{lang}.gz", "wb") as f:
                f.write(text)
        else:
            with open(f"{prefix}.{lang}", "wb") as f:
                f.write(text)


def test_training_pairs_come_from_the_files_and_the_rest_from_the_corpus(tmp_path):
    prefix = str(tmp_path / "train")
    write_pairs(prefix, gz_lang="de")  # train.en and train.de.gz
    config = TrainConfig(corpus="synthetic", synthetic_size=20, train_prefix=prefix, val_limit=5)
    train, val, test, name = load_corpora(config, log=lambda msg: None)
    assert list(zip(*sample_pairs(train, 100))) == PAIRS  # streamed: read only when trained on
    _, synthetic_val, synthetic_test = synthetic_splits(20, seed=0)
    assert val.source == synthetic_val.source[:5] and test.target == synthetic_test.target
    assert name == f"synthetic (train {prefix})"  # the name says where the pairs come from
    # train_limit applies to the files' pairs; src and tgt pick the files.
    config = config.replace(train_limit=2, src="de", tgt="en")
    train = load_corpora(config, log=lambda msg: None)[0]
    assert list(zip(*reversed(sample_pairs(train, 100)))) == PAIRS[:2]


def test_multi30k_val_and_test_without_its_train_split(data_dir, tmp_path):
    # A data directory holding only val and test: the train split is never read.
    local = tmp_path / "multi30k"
    local.mkdir()
    for name in ("val.en.gz", "val.de.gz", "test_2016_flickr.en.gz", "test_2016_flickr.de.gz"):
        shutil.copy(os.path.join(data_dir, name), local / name)
    prefix = str(tmp_path / "train")
    write_pairs(prefix)
    config = TrainConfig(corpus="multi30k", train_prefix=prefix, test_limit=7)
    train, val, test, name = load_corpora(config, data_dir=str(local), log=lambda msg: None)
    assert len(sample_pairs(train, 100)[0]) == 3 and len(val) == 1014 and len(test) == 7
    assert name == f"multi30k en->de (train {prefix})"


def test_missing_files_are_a_clear_error(tmp_path):
    config = TrainConfig(corpus="synthetic", train_prefix=str(tmp_path / "nope"))
    with pytest.raises(CorpusError, match="file not found: .*nope.en"):
        load_corpora(config, log=lambda msg: None)


def test_the_field_is_set_and_saved_like_any_other(tmp_path):
    config = apply_overrides(TrainConfig(), [f"train_prefix={tmp_path}/union"])
    assert config.train_prefix == f"{tmp_path}/union"
    assert TrainConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert apply_overrides(config, ["train_prefix=none"]).train_prefix is None
    # A config.json written before the field existed reads as "the corpus's train split".
    old = {k: v for k, v in TrainConfig().to_dict().items() if k != "train_prefix"}
    assert TrainConfig.from_dict(old).train_prefix is None
