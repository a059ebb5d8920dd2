"""A TensorFlow SavedModel that translates strings: tokenizer, search and detokenizer in one graph.

:func:`export_translator` writes a model (an ``EncoderDecoder`` or an ``Ensemble``) and its
vocabulary as a SavedModel with two signatures over a ``tf.string [batch]`` input
named ``sentences``:

- ``translate`` → ``translation`` ``tf.string [batch]``, ``score`` and ``log_prob``
  ``float32 [batch]``;
- ``translate_n_best`` → ``translations`` ``tf.string [batch, N]``, ``scores`` and
  ``log_probs`` ``float32 [batch, N]``, best first.

``score`` is the length-normalized score the beam ranks by, at every beam size, greedy
included; ``log_prob`` the model's log-probability of the translation, eos included (what
``memnmt score`` gives the same subwords): the two kinds of
:func:`keras_memnmt.evaluation.translation.score_kinds`.

Loading it needs ``tensorflow`` and ``tensorflow_text`` (for the SentencePiece ops),
not this library. Each signature runs, in the graph:

1. Invalid UTF-8 is replaced (U+FFFD per bad sequence, ``tf.strings.unicode_transcode``).
2. Leading and trailing whitespace is stripped, with Python's ``str.strip`` set of
   whitespace characters; a sentence left empty translates to ``""`` with score 0.0
   (``memnmt translate`` leaves such a line empty).
3. The rest is tokenized by the run's ``vocab/source.model``; a sentence of more than
   ``max_length`` subword tokens keeps its first ``max_length``; eos is appended and
   the batch is padded to a multiple of 8 (:func:`keras_memnmt.data.encode_sources`
   and :func:`keras_memnmt.evaluation.translation.translate` do the same).
4. The model's own compiled search (:meth:`Generator.generate
   <keras_memnmt.models.generation.Generator.generate>`, greedy or beam) decodes the
   non-empty sentences as one batch.
5. The tokens before the first eos, less pad and bos, are detokenized by
   ``vocab/target.model``.

The ids need no mapping: the library trains SentencePiece with ``pad=0, unk=1, bos=2,
eos=3`` (:mod:`keras_memnmt.data.vocab`), so SentencePiece's ids are the model's ids.

Tracing needs the TensorFlow backend. Under JAX or PyTorch, :func:`export_translator`
saves the model (``.keras``, backend independent) and the vocabulary to a temporary
folder and exports them in a subprocess run with ``KERAS_BACKEND=tensorflow``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence

import keras

from keras_memnmt.atomic import atomic_directory, check_destination
from keras_memnmt.data import MAX_INPUT_TOKENS
from keras_memnmt.data.vocab import BOS_ID, EOS_ID, PAD_ID, SubwordVocab

SIGNATURES = ("translate", "translate_n_best")
INPUT_NAME = "sentences"
METADATA_FILE = os.path.join("assets.extra", "memnmt_export.json")
PAD_MULTIPLE = 8  # source widths are padded to a multiple of 8, as inference.translate pads them
MAX_LENGTH_A, MAX_LENGTH_B = 1.5, 10  # output length cap a·|x| + b: Generator.generate's defaults
ERROR_PREFIX = "memnmt export: error: "


class ExportError(ValueError):
    """A model that cannot be exported, or an export subprocess that failed."""


# What an export folder holds: tf.saved_model.save's files and :data:`METADATA_FILE`.
EXPORT_NAMES = ("saved_model.pb", "fingerprint.pb", "variables", "assets", "assets.extra")


def not_an_export(path: str) -> str | None:
    """Why the existing folder ``path`` is no export that this library wrote and nothing
    else (``None`` when it is one, or is empty). An export is told by its
    :data:`METADATA_FILE` (``"library": "keras_memnmt"``), not by file names alone; a
    file beside it that the export did not write (a TensorFlow Serving warm-up file in
    ``assets.extra/``, notes) makes the folder more than an export."""
    names = os.listdir(path)
    if not names:
        return None
    try:
        with open(os.path.join(path, METADATA_FILE), encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError):
        info = None
    if not isinstance(info, dict) or info.get("library") != "keras_memnmt":
        return f"it holds no export (no {METADATA_FILE} written by keras_memnmt)"
    extra = [n for n in sorted(names) if n not in EXPORT_NAMES]
    extra += [
        os.path.join("assets.extra", n)
        for n in sorted(os.listdir(os.path.join(path, "assets.extra")))
        if n != os.path.basename(METADATA_FILE)
    ]
    if extra:
        return f"it holds {extra[0]}, which no export writes"
    return None


def check_export_destination(out_dir: str, overwrite: bool) -> None:
    """A ``FileExistsError`` for an existing ``out_dir`` that is not an export and nothing
    else (:func:`not_an_export`: a run, a dataset, a user's files), ``overwrite`` or not:
    overwriting replaces an earlier export only; then
    :func:`~keras_memnmt.atomic.check_destination` (an earlier export needs
    ``overwrite``)."""
    if os.path.lexists(out_dir):
        why = not_an_export(out_dir) if os.path.isdir(out_dir) else "it is not a folder"
        if why and (overwrite or os.path.isdir(out_dir)):
            raise FileExistsError(
                f"{out_dir}: {why}; --overwrite (overwrite=True) replaces only an earlier export; choose another --out"
            )
    check_destination(out_dir, overwrite)


def export_translator(
    model: keras.Model,
    vocab: SubwordVocab,
    out_dir: str,
    beam_size: int = 5,
    length_penalty: str = "gnmt",
    alpha: float = 0.6,
    max_length: int = MAX_INPUT_TOKENS,
    n_best: int | None = None,
    overwrite: bool = False,
    metadata: dict | None = None,
) -> str:
    """Writes ``model`` and ``vocab`` as a string-in, string-out SavedModel at ``out_dir``.

    Args:
        model: a trained ``EncoderDecoder`` or ``Ensemble`` (anything with the
            :class:`~keras_memnmt.models.generation.Generator` search).
        vocab: the run's vocabulary (source side encodes, target side decodes).
        out_dir: the SavedModel directory; written next to it, then renamed into place.
        beam_size: beam size (1 = greedy search), as ``memnmt translate --beam``.
        length_penalty: ``"gnmt"``, ``"average"`` or ``"none"`` (beam scores).
        alpha: the GNMT length-penalty exponent.
        max_length: source sentences are truncated to this many subword tokens
            (default 200, as ``memnmt translate``).
        n_best: hypotheses per sentence of ``translate_n_best`` (default ``beam_size``).
        overwrite: replace an existing ``out_dir``.
        metadata: extra entries for ``assets.extra/memnmt_export.json``.

    Returns:
        ``out_dir``.

    Raises:
        FileExistsError: ``out_dir`` exists and ``overwrite`` is off, or it holds no
            export (see :func:`check_export_destination`).
        ValueError: a bad option, or a vocabulary that does not fit the model.
        ExportError: the model's search cannot be traced as a TensorFlow graph; nothing
            is left at ``out_dir``.
    """
    options = check_options(beam_size, length_penalty, alpha, max_length, n_best)
    check_export_destination(out_dir, overwrite)
    _check_model(model, vocab)
    if keras.backend.backend() != "tensorflow":
        with tempfile.TemporaryDirectory(prefix="memnmt-export-") as tmp:
            model_file = os.path.join(tmp, "model.keras")
            model.save(model_file)
            vocab.save(os.path.join(tmp, "vocab"))
            spec = {"model_file": model_file, "vocab_dir": os.path.join(tmp, "vocab")}
            _export_in_subprocess(spec, out_dir, options, overwrite, metadata)
        return out_dir
    return _export(model, vocab, out_dir, options, overwrite, metadata)


def export_runs(
    members: Sequence[str | tuple[str, str | None]],
    out_dir: str,
    beam_size: int = 5,
    length_penalty: str = "gnmt",
    alpha: float = 0.6,
    max_length: int = MAX_INPUT_TOKENS,
    n_best: int | None = None,
    overwrite: bool = False,
) -> str:
    """Exports run directories (one, or an ensemble) as :func:`export_translator` does.

    ``members``: run directories or ``(run_dir, checkpoint)`` pairs, as
    :func:`keras_memnmt.rundir.loading.load_ensemble` takes them (several: an ensemble). Under
    JAX or PyTorch the runs are loaded and exported in a subprocess with
    ``KERAS_BACKEND=tensorflow``.
    """
    options = check_options(beam_size, length_penalty, alpha, max_length, n_best)
    check_export_destination(out_dir, overwrite)
    pairs = [(m, None) if isinstance(m, str) else (m[0], m[1]) for m in members]
    if not pairs:
        raise ValueError("export needs at least one run directory")
    for run_dir, _ in pairs:
        if not os.path.isdir(run_dir):
            raise FileNotFoundError(f"model directory not found: {run_dir}")
    metadata = {"members": [{"run": os.path.abspath(r), "checkpoint": c} for r, c in pairs]}
    if keras.backend.backend() != "tensorflow":
        _export_in_subprocess({"members": pairs}, out_dir, options, overwrite, metadata)
        return out_dir
    from keras_memnmt.rundir.loading import load_ensemble

    model, vocab, _ = load_ensemble(pairs)
    return _export(model, vocab, out_dir, options, overwrite, metadata)


def check_options(beam_size: int, length_penalty: str, alpha: float, max_length: int, n_best: int | None) -> dict:
    """The search options as a dict, or a ``ValueError`` naming the bad one (the search's
    through :class:`~keras_memnmt.decoding.settings.SearchSettings`)."""
    from keras_memnmt.decoding.settings import SearchSettings

    settings = SearchSettings(beam=beam_size, n_best=n_best, length_penalty=length_penalty, alpha=alpha)
    if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
        raise ValueError(f"max_length must be an integer >= 1, got {max_length!r}")
    return {
        "beam_size": settings.beam_size,
        "length_penalty": settings.length_penalty,
        "alpha": float(settings.alpha),
        "max_length": max_length,
        "n_best": settings.n_best or settings.beam_size,
    }


def _check_model(model, vocab: SubwordVocab) -> None:
    """An ``ExportError`` for a model without the Generator search, a ``ValueError`` for a
    vocabulary of another size than the model's."""
    from keras_memnmt.models.generation import Generator

    if not isinstance(model, Generator):
        raise ExportError(
            f"{type(model).__name__} has no Generator search (encode, decode_step, "
            "generate): only the library's models and Ensembles can be exported"
        )
    for side in ("source", "target"):
        size = getattr(model, f"{side}_vocab_size", None)
        pieces = getattr(vocab, side).vocab_size
        if size is not None and size != pieces:
            raise ValueError(
                f"the model's {side}_vocab_size is {size} but the {side} vocabulary "
                f"has {pieces} pieces: not this model's vocabulary"
            )


def _export(model, vocab: SubwordVocab, out_dir: str, options: dict, overwrite: bool, metadata: dict | None) -> str:
    import tensorflow as tf

    _check_model(model, vocab)
    if not model.built:  # create the weights eagerly, never inside the trace
        model((tf.constant([[EOS_ID]], tf.int32), tf.constant([[BOS_ID]], tf.int32)))
    module = build_translator(model, vocab, **options)
    info = {
        "library": "keras_memnmt",
        "model": type(model).__name__,
        **options,
        "max_length_a": MAX_LENGTH_A,
        "max_length_b": MAX_LENGTH_B,
        "input": INPUT_NAME,
        "signatures": {
            "translate": ["translation", "score", "log_prob"],
            "translate_n_best": ["translations", "scores", "log_probs"],
        },
        **(metadata or {}),
    }
    # tf.saved_model.save traces the functions again: both traces without rematerialization.
    with _no_rematerialization(model):
        try:
            signatures = {
                "translate": module.translate.get_concrete_function(),
                "translate_n_best": module.translate_n_best.get_concrete_function(),
            }
        except Exception as e:  # any tracing failure: this model cannot be exported
            raise ExportError(
                f"cannot export {type(model).__name__} ({model.name}): its search "
                "does not trace as one TensorFlow graph for any batch size: "
                f"{type(e).__name__}: {e}"
            ) from e
        signatures["serving_default"] = signatures["translate"]
        with atomic_directory(out_dir, overwrite, check_export_destination) as partial:
            tf.saved_model.save(module, partial, signatures=signatures)
            os.makedirs(os.path.join(partial, "assets.extra"), exist_ok=True)
            with open(os.path.join(partial, METADATA_FILE), "w") as f:
                json.dump(info, f, indent=2)
    return out_dir


@contextlib.contextmanager
def _no_rematerialization(model) -> Iterator[None]:
    """Traces attention layers without ``keras.remat`` (``rematerialize=False``), then restores it.

    Rematerialization changes only the backward pass; in a SavedModel its custom-gradient
    ops would only make ``tf.saved_model.load`` warn about gradients nobody asks for.
    """
    layers = [
        layer
        for layer in model._flatten_layers(include_self=True, recursive=True)
        if getattr(layer, "rematerialize", False) is True
    ]
    for layer in layers:
        layer.rematerialize = False
    try:
        yield
    finally:
        for layer in layers:
            layer.rematerialize = True


def _whitespace_pattern() -> str:
    """An RE2 pattern for leading and trailing runs of the characters ``str.strip`` removes."""
    chars = "".join(f"\\x{{{c:x}}}" for c in range(sys.maxunicode + 1) if chr(c).isspace())
    return f"^[{chars}]+|[{chars}]+$"


class _Unsaved:
    """Holds an object out of a ``tf.Module``'s saved object graph (the Keras model: only
    its variables and its traced search go into the SavedModel)."""

    def __init__(self, value):
        self.value = value


def _make_translator_class():
    import tensorflow as tf
    import tensorflow_text as tf_text

    class _Translator(tf.Module):
        """The exported object: the model's variables, both tokenizers and the two signatures.

        tensorflow-text's ``SentencepieceTokenizer`` is used directly, not keras-hub's
        ``SentencePieceTokenizer`` layer that wraps it: the tokenizer is a trackable
        TensorFlow resource that ``tf.saved_model.save`` stores with its model proto
        (a consumer then needs only ``tensorflow_text``), whereas the keras-hub layer
        would bring Keras layer state into the SavedModel and, under JAX or PyTorch,
        converts its outputs to backend tensors; the graph needs plain TF tensors.
        """

        def __init__(
            self,
            model,
            vocab: SubwordVocab,
            beam_size: int,
            length_penalty: str,
            alpha: float,
            max_length: int,
            n_best: int,
        ):
            super().__init__(name="memnmt_translator")
            # The weights, tracked so that the SavedModel stores them.
            self.model_variables = [v.value for v in model.variables]
            # Distinct names: two tokenizers of one SavedModel whose ops share a name are
            # restored as one resource (the second then tokenizes with the first's model).
            self.source_tokenizer = tf_text.SentencepieceTokenizer(
                model=vocab.source.proto, out_type=tf.int32, name="source_sentencepiece"
            )
            self.target_tokenizer = tf_text.SentencepieceTokenizer(
                model=vocab.target.proto, out_type=tf.int32, name="target_sentencepiece"
            )
            self._model = _Unsaved(model)
            self._search = (beam_size, MAX_LENGTH_A, MAX_LENGTH_B, length_penalty, alpha)
            self._max_length = max_length
            self._n_best = n_best
            self._strip = _whitespace_pattern()
            spec = [tf.TensorSpec([None], tf.string, name=INPUT_NAME)]
            # autograph=False, as Generator's own tf.function: the search is keras.ops already.
            self.translate = tf.function(self._translate, input_signature=spec, autograph=False)
            self.translate_n_best = tf.function(self._translate_n_best, input_signature=spec, autograph=False)

        def _translate(self, sentences):
            texts, scores, log_probs = self._run(sentences, 1)
            return {"translation": texts[:, 0], "score": scores[:, 0], "log_prob": log_probs[:, 0]}

        def _translate_n_best(self, sentences):
            texts, scores, log_probs = self._run(sentences, self._n_best)
            return {"translations": texts, "scores": scores, "log_probs": log_probs}

        def _run(self, sentences, n_best: int):
            """Strings ``(B,)`` → ``texts (B, n_best) tf.string``, and the normalized scores
            and log-probabilities ``(B, n_best) float32``."""
            # 1-2. Valid UTF-8, stripped; an empty sentence is not decoded.
            text = tf.strings.unicode_transcode(sentences, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD)
            text = tf.strings.regex_replace(text, self._strip, "")
            present = tf.strings.length(text) > 0  # (B,)
            rows = tf.cast(tf.where(present)[:, 0], tf.int32)  # (N,) the non-empty sentences
            count = tf.size(rows)

            def decode():
                # 3. Subword ids, truncated, plus eos; padded to a multiple of 8.
                ids = self.source_tokenizer.tokenize(tf.gather(text, rows))[:, : self._max_length]
                eos = tf.RaggedTensor.from_tensor(tf.fill([count, 1], EOS_ID))
                ids = tf.concat([tf.cast(ids, tf.int32), eos], axis=1)  # (N, None)
                longest = tf.reduce_max(ids.row_lengths())
                width = (longest + PAD_MULTIPLE - 1) // PAD_MULTIPLE * PAD_MULTIPLE
                source = ids.to_tensor(PAD_ID, shape=tf.stack([tf.cast(count, tf.int64), width]))
                source = tf.cast(source, tf.int32)  # (N, W)
                # 4. The model's search, traced for any batch size and width up to the cap.
                cap = -(-(self._max_length + 1) // PAD_MULTIPLE) * PAD_MULTIPLE
                beam, a, b, penalty, alpha = self._search
                from keras_memnmt.models.generation import SearchPlan

                plan = SearchPlan(
                    beam_size=beam, max_length_a=a, max_length_b=b, length_penalty=penalty, alpha=alpha, n_best=n_best
                )
                out = self._model.value._generate(source, plan=plan, width_cap=cap)
                tokens = tf.reshape(tf.convert_to_tensor(out["tokens"]), [count * n_best, -1])
                # 5. The tokens before the first eos, less pad and bos, as text.
                before_eos = tf.math.cumsum(tf.cast(tokens == EOS_ID, tf.int32), axis=1) == 0
                keep = before_eos & (tokens != PAD_ID) & (tokens != BOS_ID)
                texts = self.target_tokenizer.detokenize(tf.ragged.boolean_mask(tokens, keep))
                # Both kinds of score from |Y| (tokens through eos), as score_kinds derives them:
                # the beam gives the normalized one, greedy search the log-probability.
                lengths = tf.reduce_sum(tf.cast(before_eos & (tokens != PAD_ID), tf.int32), axis=1) + 1
                from keras_memnmt.decoding.common import length_penalty as divisor

                lp = tf.reshape(tf.cast(divisor(lengths, penalty, alpha), tf.float32), [count, n_best])
                raw = tf.reshape(tf.cast(out["scores"], tf.float32), [count, n_best])
                scores, log_probs = (raw / lp, raw) if beam == 1 else (raw, raw * lp)
                return tf.reshape(texts, [count, n_best]), scores, log_probs

            def nothing():
                return (
                    tf.zeros([0, n_best], tf.string),
                    tf.zeros([0, n_best], tf.float32),
                    tf.zeros([0, n_best], tf.float32),
                )

            texts, scores, log_probs = tf.cond(count > 0, decode, nothing)  # (N, n_best) each
            # Back to the input rows; an empty sentence gets "" and 0.0 (index N: a filler row).
            index = tf.where(present, tf.cumsum(tf.cast(present, tf.int32)) - 1, count)  # (B,)
            out = [tf.concat([texts, tf.fill([1, n_best], "")], axis=0)]
            out += [tf.concat([x, tf.zeros([1, n_best], tf.float32)], axis=0) for x in (scores, log_probs)]
            return tuple(tf.ensure_shape(tf.gather(x, index), [None, n_best]) for x in out)

    return _Translator


def build_translator(model, vocab: SubwordVocab, **options):
    """The ``tf.Module`` that :func:`export_translator` saves (see ``_Translator``).

    Built lazily so that importing this module needs neither TensorFlow nor tensorflow-text.
    """
    return _make_translator_class()(model, vocab, **options)


def _export_in_subprocess(spec: dict, out_dir: str, options: dict, overwrite: bool, metadata: dict | None) -> None:
    """Runs ``python -m keras_memnmt.export`` with ``KERAS_BACKEND=tensorflow``."""
    request = {
        **spec,
        "out_dir": os.path.abspath(out_dir),
        "options": options,
        "overwrite": overwrite,
        "metadata": metadata or {},
    }
    env = {**os.environ, "KERAS_BACKEND": "tensorflow"}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    proc = subprocess.Popen(
        [sys.executable, "-m", "keras_memnmt.export", json.dumps(request)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err = proc.communicate()
    except BaseException:  # interrupted: the child removes its partial directory on SIGTERM
        proc.terminate()
        proc.wait()
        raise
    if proc.returncode == 0:
        return
    # The subprocess reports an error as one `ERROR_PREFIX {"type": ..., "message": ...}` line.
    reports = [line[len(ERROR_PREFIX) :] for line in err.splitlines() if line.startswith(ERROR_PREFIX)]
    if not reports:
        raise ExportError(
            f"the export under KERAS_BACKEND=tensorflow failed (exit status {proc.returncode}): {err.strip()[-2000:]}"
        )
    report = json.loads(reports[-1])
    error = {"FileNotFoundError": FileNotFoundError, "FileExistsError": FileExistsError, "ValueError": ValueError}.get(
        report["type"], ExportError
    )
    raise error(report["message"])
