"""Subword vocabulary: SentencePiece trained on the training split.

Two front ends over the same serialized model, giving the same ids:

- :meth:`SentencePieceVocab.encode` / :meth:`~SentencePieceVocab.decode` (Python
  lists and arrays) call the ``sentencepiece`` package directly. Training, the
  data pipeline and translation use only these, so a training process never
  loads tensorflow-text: its op libraries add about 120 MB of resident memory
  (measured: ``import tensorflow, keras, sentencepiece`` 675 MB of RSS, with
  ``tensorflow_text`` 794 MB), a tenth of the 1.4 GB training-memory goal.
- :meth:`SentencePieceVocab.tokenize` / :meth:`~SentencePieceVocab.detokenize`
  are ``tensorflow_text.SentencepieceTokenizer`` ops, for code that must run
  inside a TensorFlow graph (an exported SavedModel taking strings).
  tensorflow-text is imported the first time one of them is traced. (keras-hub's
  ``SentencePieceTokenizer`` wraps this same op in a Layer that converts its
  outputs to backend tensors when called eagerly under JAX/PyTorch; graph code
  wants plain TF tensors on every backend, so we call the op directly.)

Reserved ids, identical in every vocabulary this library writes:
``pad = 0``, ``unk = 1``, ``bos = 2``, ``eos = 3`` (:mod:`keras_memnmt.tokens`).
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence

from keras_memnmt.files import write_bytes, write_json
from keras_memnmt.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID

MODEL_TYPES = ("unigram", "bpe")


class SentencePieceVocab:
    """One trained SentencePiece model, usable in eager code, tf.data and graphs.

    Args:
        proto: the serialized SentencePiece model (bytes).
    """

    def __init__(self, proto: bytes):
        import sentencepiece as spm

        if not isinstance(proto, bytes) or not proto:
            raise ValueError("proto must be the non-empty bytes of a SentencePiece model")
        self.proto = proto
        self._processor = spm.SentencePieceProcessor(model_proto=proto)
        self.vocab_size = int(self._processor.get_piece_size())
        self._graph_ops = None  # (tokenize, detokenize), built on first use

    def _ops(self):
        """The TensorFlow tokenize and detokenize functions, built on first use: the eager
        :meth:`encode` and :meth:`decode` (SentencePiece alone) work without TensorFlow."""
        if self._graph_ops is None:
            import tensorflow as tf

            proto = self.proto

            # The tokenizer op is built *inside* each tf.function, not eagerly: an eagerly
            # created SentencePiece resource lives in TF's eager kernel cache, which
            # tf.random.set_seed (so keras.utils.set_random_seed) clears, leaving a dead
            # handle. Inside a function graph the resource belongs to the function.
            def make():
                import tensorflow_text as tf_text

                return tf_text.SentencepieceTokenizer(model=proto, out_type=tf.int32)

            self._graph_ops = (
                tf.function(lambda text: make().tokenize(text), input_signature=[tf.TensorSpec([None], tf.string)]),
                tf.function(
                    lambda ids: make().detokenize(ids),
                    input_signature=[tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)],
                ),
            )
        return self._graph_ops

    def tokenize(self, text):
        """Strings ``(N,)`` tf.string → ids ``(N, None)`` tf.RaggedTensor int32; no bos/eos added."""
        return self._ops()[0](text)

    def detokenize(self, ids):
        """Ids ``(N, None)`` (tf.RaggedTensor or padded tf.Tensor) → strings ``(N,)``.

        pad/bos are dropped; in a padded tensor everything from the first eos on is ignored.
        """
        import tensorflow as tf

        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.convert_to_tensor(ids, tf.int32)
            # Keep the tokens before the first eos (or all of them), then drop pad/bos.
            before_eos = tf.math.cumsum(tf.cast(ids == EOS_ID, tf.int32), axis=-1) == 0
            ids = tf.ragged.boolean_mask(ids, before_eos & (ids != PAD_ID) & (ids != BOS_ID))
        return self._ops()[1](tf.cast(ids, tf.int32))

    def encode(self, sentences: Sequence[str]) -> list[list[int]]:
        """Python strings → Python lists of ids, no bos/eos (the ids :meth:`tokenize` gives)."""
        return self._processor.encode(list(sentences), out_type=int)

    def decode(self, ids) -> list[str]:
        """Ids (a padded array, or a list of id lists of any lengths) → Python strings.

        Like :meth:`detokenize`, stops at the first eos and drops pad/bos.
        """
        rows = []
        for row in ids:
            row = [int(i) for i in row]
            row = row[: row.index(EOS_ID)] if EOS_ID in row else row
            rows.append([i for i in row if i not in (PAD_ID, BOS_ID)])
        return self._processor.decode(rows)

    def id_to_piece(self, i: int) -> str:
        return self._processor.id_to_piece(i)


def train_sentencepiece(
    sentences: Iterable[str],
    size: int = 8000,
    model_type: str = "unigram",
    character_coverage: float = 1.0,
) -> bytes:
    """Trains a SentencePiece model on ``sentences``; returns its serialized bytes.

    ``size`` is a soft limit (``hard_vocab_limit=False``): on a small corpus the
    vocabulary is as large as the text allows instead of an error.
    """
    import sentencepiece as spm

    if model_type not in MODEL_TYPES:
        raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {model_type!r}")
    if size < 8:
        raise ValueError(f"size must be >= 8 (4 reserved ids plus pieces), got {size}")
    buf = io.BytesIO()
    try:
        _train(spm, sentences, buf, size, model_type, character_coverage)
    except RuntimeError as e:  # SentencePiece's C++ checks, as one line naming the size
        message = str(e)
        needed = re.search(r"smaller than required_chars\. \d+ vs (\d+)", message)
        if needed:
            raise ValueError(
                f"vocabulary size {size} is too small for this text: its characters and "
                f"the reserved ids need {needed.group(1)} pieces"
            ) from e
        raise ValueError(
            f"vocabulary size {size}: SentencePiece cannot train on this text: {message.split('] ', 1)[-1]}"
        ) from e
    return buf.getvalue()


def _train(spm, sentences, buf, size, model_type, character_coverage) -> None:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_writer=buf,
        vocab_size=size,
        model_type=model_type,
        character_coverage=character_coverage,
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        hard_vocab_limit=False,
        num_threads=os.cpu_count() or 1,
        minloglevel=2,
    )


class SubwordVocab:
    """Source and target SentencePiece vocabularies (joint or separate).

    Args:
        source: the source-side vocabulary.
        target: the target-side vocabulary (the same object when joint).
        config: how they were trained (``size``, ``model_type``, ``joint``).

    Example:
        >>> v = SubwordVocab.train(["a b c"] * 10, ["x y z"] * 10, size=16)  # doctest: +SKIP
        >>> v.save("run/vocab"); v2 = SubwordVocab.load("run/vocab")  # doctest: +SKIP
    """

    def __init__(self, source: SentencePieceVocab, target: SentencePieceVocab, config: dict):
        self.source = source
        self.target = target
        self.config = dict(config)

    @classmethod
    def train(
        cls,
        source_sentences: Sequence[str],
        target_sentences: Sequence[str],
        size: int = 8000,
        model_type: str = "unigram",
        joint: bool = False,
        progress: bool | None = False,
    ) -> SubwordVocab:
        """Trains SentencePiece on each side (or once on both, ``joint``).

        ``progress``: a bar on stderr over the sides trained (True; None: only when
        stderr is a terminal; False: none).
        """
        from tqdm.auto import tqdm

        config = {"size": size, "model_type": model_type, "joint": joint}
        sides = ["joint"] if joint else ["source", "target"]
        disable = True if progress is False else (None if progress is None else False)
        trained = []
        with tqdm(sides, desc="vocabulary", unit="side", disable=disable, file=sys.stderr) as bar:
            for side in bar:
                bar.set_postfix_str(side)
                text = {
                    "joint": [*source_sentences, *target_sentences],
                    "source": source_sentences,
                    "target": target_sentences,
                }[side]
                trained.append(SentencePieceVocab(train_sentencepiece(text, size, model_type)))
        if joint:
            return cls(trained[0], trained[0], config)
        return cls(trained[0], trained[1], config)

    def save(self, directory: str, made_by: str | None = None) -> None:
        """Writes ``source.model``, ``target.model`` and ``vocab.json`` into ``directory``.

        ``made_by``: the command that trained it (``"memnmt train"``, ``"memnmt vocab
        build"``), kept in ``vocab.json`` (:func:`vocabulary_maker`)."""
        os.makedirs(directory, exist_ok=True)
        for side, v in (("source", self.source), ("target", self.target)):
            write_bytes(os.path.join(directory, f"{side}.model"), v.proto)
        info = {
            **self.config,
            "source_vocab_size": self.source.vocab_size,
            "target_vocab_size": self.target.vocab_size,
            "pad_id": PAD_ID,
            "unk_id": UNK_ID,
            "bos_id": BOS_ID,
            "eos_id": EOS_ID,
            **({"made_by": made_by} if made_by else {}),
        }
        write_json(os.path.join(directory, "vocab.json"), info)  # last: its presence marks a whole vocabulary

    @classmethod
    def load(cls, directory: str) -> SubwordVocab:
        """Reads a vocabulary written by :meth:`save`; a missing file is a clear error, and a
        file that is not what its name says (a ``.model`` that SentencePiece cannot read,
        a ``vocab.json`` that is no JSON object) a :class:`VocabularyError` naming it."""
        paths = {n: os.path.join(directory, n) for n in ("source.model", "target.model", "vocab.json")}
        missing = [p for p in paths.values() if not os.path.isfile(p)]
        if missing:
            raise FileNotFoundError(f"incomplete vocabulary directory {directory}: missing {missing}")
        try:
            with open(paths["vocab.json"], encoding="utf-8") as f:
                config = json.load(f)
        except ValueError as e:  # not JSON, or not UTF-8
            raise VocabularyError(f"{paths['vocab.json']} is not a saved vocabulary's vocab.json ({e})") from None
        if not isinstance(config, dict):
            raise VocabularyError(f"{paths['vocab.json']} is not a saved vocabulary's vocab.json (not a JSON object)")
        protos = {}
        for side in ("source", "target"):
            with open(paths[f"{side}.model"], "rb") as f:
                protos[side] = f.read()
        src = _read_model(paths["source.model"], protos["source"])
        tgt = src if protos["target"] == protos["source"] else _read_model(paths["target.model"], protos["target"])
        keys = ("size", "model_type", "joint")
        return cls(src, tgt, {k: config[k] for k in keys if k in config})


class VocabularyError(ValueError):
    """A vocabulary file that exists but is not what its name says (a corrupt ``.model``)."""


def _read_model(path: str, proto: bytes) -> SentencePieceVocab:
    """``SentencePieceVocab(proto)`` of the file ``path``; a :class:`VocabularyError` naming
    it where SentencePiece cannot read it (truncated, corrupt, empty)."""
    try:
        return SentencePieceVocab(proto)
    except (RuntimeError, ValueError):  # SentencePiece's C++ parse error is a RuntimeError
        raise VocabularyError(
            f"{path} is not a SentencePiece model (SentencePiece cannot read its "
            f"{len(proto)} bytes): the vocabulary is truncated or corrupt"
        ) from None


VOCAB_NAMES = ("source.model", "target.model", "vocab.json")  # what :meth:`SubwordVocab.save` writes


def vocabulary_maker(directory: str) -> str | None:
    """The command that made the vocabulary in ``directory``, as its ``vocab.json`` says
    (:meth:`SubwordVocab.save`'s ``made_by``); ``None`` where it says none (no such file,
    or a vocabulary saved before vocabularies said it)."""
    try:
        with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError):
        return None
    made_by = info.get("made_by") if isinstance(info, dict) else None
    return made_by if isinstance(made_by, str) else None


def is_saved_vocabulary(directory: str) -> bool:
    """Whether ``directory/vocab.json`` is the one :meth:`SubwordVocab.save` writes (a JSON
    object with both sides' sizes and the special ids), whatever else the folder holds:
    the content, not the file names, tells a vocabulary from a user's files."""
    try:
        with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError):
        return False
    keys = ("source_vocab_size", "target_vocab_size", "pad_id", "unk_id", "bos_id", "eos_id")
    return isinstance(info, dict) and all(k in info for k in keys)


def is_vocabulary_in_progress(directory: str) -> bool:
    """Whether ``directory`` holds what :meth:`SubwordVocab.save` writes, whole or cut short
    by a kill (``vocab.json`` is written last): nothing but :data:`VOCAB_NAMES`, each
    ``.model`` a SentencePiece model and ``vocab.json``, where present, a saved
    vocabulary's. An empty folder is one (nothing of it written yet)."""
    import sentencepiece as spm

    names = os.listdir(directory) if os.path.isdir(directory) else None
    if names is None or any(n not in VOCAB_NAMES for n in names):
        return False
    for name in names:
        if name.endswith(".model"):
            try:
                with open(os.path.join(directory, name), "rb") as f:
                    spm.SentencePieceProcessor(model_proto=f.read())
            except (OSError, RuntimeError, TypeError, ValueError):
                return False
    return "vocab.json" not in names or is_saved_vocabulary(directory)


MAX_INPUT_TOKENS = 200  # longer inputs are truncated (with a warning on stderr)


def encode_sources(
    vocab: SubwordVocab, sentences: Sequence[str], max_tokens: int = MAX_INPUT_TOKENS
) -> list[list[int]]:
    """Subword ids of each source sentence plus eos; over-long ones truncated with a warning."""
    ids = vocab.source.encode([s.strip() for s in sentences])
    out = []
    for i, row in enumerate(ids):
        if len(row) > max_tokens:
            print(
                f"warning: input line {i + 1} has {len(row)} subword tokens; truncated to {max_tokens}", file=sys.stderr
            )
            row = row[:max_tokens]
        out.append(row + [EOS_ID])
    return out
