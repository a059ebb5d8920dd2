import numpy as np
import pytest
import tensorflow as tf

from keras_memnmt.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SubwordVocab

# The same on every backend: CI runs it on one (conftest.py).
pytestmark = pytest.mark.backend_independent


def test_reserved_ids(small_vocab):
    for v in (small_vocab.source, small_vocab.target):
        assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
        assert v.id_to_piece(UNK_ID) == "<unk>"
        assert v.id_to_piece(BOS_ID) == "<s>" and v.id_to_piece(EOS_ID) == "</s>"
        ids = v.encode(["a dog runs"])[0]
        assert min(ids) > EOS_ID  # ordinary text never produces the reserved ids


def test_round_trip_on_real_text(small_vocab, val_corpus):
    sents = val_corpus.target[:50]
    assert small_vocab.target.decode(small_vocab.target.encode(sents)) == sents


def test_unseen_characters_map_to_unk(small_vocab):
    ids = small_vocab.source.encode(["\u4e2d\u6587"])[0]
    assert UNK_ID in ids


def test_detokenize_stops_at_eos_and_drops_pad_bos(small_vocab):
    v = small_vocab.target
    ids = v.encode(["ein Hund"])[0]
    padded = np.array([[BOS_ID, *ids, EOS_ID, *ids, PAD_ID]], np.int32)
    assert v.decode(padded) == ["ein Hund"]
    assert v.decode([[BOS_ID, *ids, EOS_ID, 99]]) == ["ein Hund"]
    assert v.decode([[]]) == [""]


def test_tokenize_runs_inside_a_tf_graph(small_vocab):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(text):
        return small_vocab.target.detokenize(small_vocab.target.tokenize(text))

    out = round_trip(tf.constant(["zwei Hunde", "ein Mann"])).numpy().tolist()
    assert out == [b"zwei Hunde", b"ein Mann"]


def test_python_and_graph_front_ends_agree(small_vocab, val_corpus):
    """encode/decode (sentencepiece package) and tokenize/detokenize (TF op) give the same ids."""
    for v, texts in ((small_vocab.source, val_corpus.source), (small_vocab.target, val_corpus.target)):
        texts = [*texts, "", "   ", "\u4e2d\u6587 a", "A  dog\truns ."]
        ids = v.encode(texts)
        assert ids == v.tokenize(tf.constant(texts)).to_list()
        graph = [s.decode("utf-8") for s in v.detokenize(tf.ragged.constant(ids)).numpy().tolist()]
        assert v.decode(ids) == graph


def test_training_and_translation_do_not_load_tensorflow_text(tmp_path):
    """The pipeline, training and translation use the sentencepiece package only (~120 MB less RSS)."""
    import subprocess
    import sys

    code = """
import sys
from keras_memnmt.data import SubwordVocab, make_dataset
from keras_memnmt.data.synthetic import synthetic_corpus
from keras_memnmt.evaluation.translation import translate
from keras_memnmt.models import RNNsearch
c = synthetic_corpus(64, seed=0)
v = SubwordVocab.train(c.source, c.target, size=40)
ds, _ = make_dataset(c, v, batch_size=16, max_length=30)
m = RNNsearch(v.source.vocab_size, v.target.vocab_size, embedding_dim=8, encoder_units=8,
              decoder_units=8, attention_units=8, readout_units=8)
m.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
m.fit(ds.take(2), verbose=0)
print(translate(m, v, c.source[:3], beam_size=2, progress=False))
assert "tensorflow_text" not in sys.modules, "tensorflow_text was imported"
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]


def test_save_load(small_vocab, tmp_path):
    small_vocab.save(str(tmp_path / "vocab"))
    v = SubwordVocab.load(str(tmp_path / "vocab"))
    assert v.config == small_vocab.config
    assert v.target.encode(["ein Hund"]) == small_vocab.target.encode(["ein Hund"])
    (tmp_path / "vocab" / "target.model").unlink()
    with pytest.raises(FileNotFoundError, match="target.model"):
        SubwordVocab.load(str(tmp_path / "vocab"))


def test_joint_and_bpe(val_corpus):
    v = SubwordVocab.train(val_corpus.source[:300], val_corpus.target[:300], size=300, model_type="bpe", joint=True)
    assert v.source is v.target
    assert v.source.decode(v.source.encode(["A dog."])) == ["A dog."]
    with pytest.raises(ValueError, match="model_type"):
        SubwordVocab.train(["a"], ["b"], model_type="word")


def test_survives_keras_set_random_seed(small_vocab):
    """tf.random.set_seed clears TF's eager kernel cache; the tokenizer must not live there."""
    import keras

    before = small_vocab.target.encode(["ein Hund"])
    keras.utils.set_random_seed(123)
    assert small_vocab.target.encode(["ein Hund"]) == before
    assert small_vocab.target.decode(before) == ["ein Hund"]
