"""Exporting a Transformer run for CTranslate2 (``memnmt export --format ctranslate2``).

CTranslate2 is the inference engine OpenNMT-py, fairseq and Marian users deploy their
Transformers with. Its own converters read those toolkits' checkpoints, not a Keras model,
so the model is described here with CTranslate2's ``TransformerSpec`` from the Keras
weights (the layout its OpenNMT-py converter fills), and CTranslate2's ``Converter`` checks,
quantizes and saves it. The directory holds what ``ctranslate2.Translator`` loads
(``model.bin``, ``config.json``, the vocabularies) plus the run's SentencePiece models
(``source.model``, ``target.model``) and ``memnmt_ctranslate2.json``; see docs/export.md.

The mapping (:func:`transformer_spec`):

- pre-norm layers and a final layer norm on each side, ReLU feed-forward networks, the
  layer norms' epsilon (``LAYER_NORM_EPSILON``) in the model's ``config.json``;
- the attention projections of ``keras.layers.MultiHeadAttention`` (kernels ``(D, H, D/H)``
  and ``(H, D/H, D)``) as CTranslate2's ``(out, in)`` matrices, the self-attention's query,
  key and value fused into one, the cross-attention's key and value into one;
- embeddings with their scale multiplied in (``scale_embeddings`` off): the source's own
  ``lookup_scale``, or the shared target embedding's ``sqrt(d)``;
- the sine positions as an explicit table of ``POSITIONS`` rows (keras-hub's interleaved
  ``SinePositionEncoding``, not CTranslate2's built-in concatenated one);
- the output projection: the target embedding (tied) or the output layer's kernel, no bias;
- the source gets eos appended (``add_source_eos``), and the target starts from bos, as
  :meth:`~keras_memnmt.models.Transformer.encode` and the search do.
"""

from __future__ import annotations

import json
import os

import numpy as np

from keras_memnmt.atomic import atomic_directory

METADATA_FILE = "memnmt_ctranslate2.json"
POSITIONS = 1024  # rows of the position table: the longest source or output CTranslate2 can take
QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16")


def _require():
    try:
        import ctranslate2
    except ImportError as e:
        raise ImportError(
            "--format ctranslate2 needs the `ctranslate2` package: pip install 'keras-memnmt[ctranslate2]'"
        ) from e
    return ctranslate2


def _linear(spec, kernel, bias=None) -> None:
    """A Keras kernel ``(in, out)`` as CTranslate2's ``(out, in)`` weight."""
    spec.weight = np.ascontiguousarray(np.asarray(kernel, np.float32).T)
    if bias is not None:
        spec.bias = np.asarray(bias, np.float32)


def _norm(spec, layer) -> None:
    spec.gamma = np.asarray(layer.gamma, np.float32)
    spec.beta = np.asarray(layer.beta, np.float32)


def _projections(dense) -> tuple[np.ndarray, np.ndarray]:
    """An ``EinsumDense`` of ``MultiHeadAttention`` as ``(kernel (in, out), bias (out,))``,
    its heads' columns side by side (head 0's first, as CTranslate2 splits them)."""
    kernel = np.asarray(dense.kernel, np.float32)
    bias = np.asarray(dense.bias, np.float32)
    if bias.ndim == 2:  # query, key, value: kernel (D, H, D/H), bias (H, D/H)
        return kernel.reshape(kernel.shape[0], -1), bias.reshape(-1)
    return kernel.reshape(-1, kernel.shape[-1]), bias.reshape(-1)  # output (H, D/H, D)


def _attention(spec, attention, layer_norm, fuse: tuple[str, ...]) -> None:
    """``spec.linear``: the projections named in ``fuse`` as one matrix, then the others."""
    from ctranslate2.converters import utils
    from ctranslate2.specs import common_spec

    names = {"query": attention._query_dense, "key": attention._key_dense, "value": attention._value_dense}
    order = [n for n in ("query", "key", "value") if n not in fuse]
    linears = []
    for group in [fuse] if fuse == ("query", "key", "value") else [tuple(order), fuse]:
        parts = []
        for name in group:
            part = common_spec.LinearSpec()
            _linear(part, *_projections(names[name]))
            parts.append(part)
        linears.append(parts)
    for target, parts in zip(spec.linear, linears):
        if len(parts) == 1:
            target.weight, target.bias = parts[0].weight, parts[0].bias
        else:
            utils.fuse_linear(target, parts)
    _linear(spec.linear[-1], *_projections(attention._output_dense))
    _norm(spec.layer_norm, layer_norm)


def _ffn(spec, layer) -> None:
    _norm(spec.layer_norm, layer._feedforward_layer_norm)
    _linear(spec.linear_0, layer._feedforward_intermediate_dense.kernel, layer._feedforward_intermediate_dense.bias)
    _linear(spec.linear_1, layer._feedforward_output_dense.kernel, layer._feedforward_output_dense.bias)


def _positions(layer, dim: int) -> np.ndarray:
    from keras import ops

    return np.asarray(ops.convert_to_numpy(layer(ops.zeros((1, POSITIONS, dim)))), np.float32).reshape(POSITIONS, dim)


def check_model(model) -> None:
    """A ``ValueError`` unless ``model`` is a Transformer this export can describe."""
    from keras_memnmt.models.transformer import Transformer

    if not isinstance(model, Transformer):
        raise ValueError(
            f"--format ctranslate2 exports Transformer runs; this run's model is "
            f"{type(model).__name__} (CTranslate2 has no recurrent decoders)"
        )
    for layer in [*model.encoder.encoder_layers, *model.decoder_layers]:
        activation = layer.activation
        name = activation if isinstance(activation, str) else getattr(activation, "__name__", repr(activation))
        if name != "relu":
            raise ValueError(f"--format ctranslate2 needs ReLU feed-forward networks, got {name!r} in {layer.name}")


def transformer_spec(model, vocab):
    """CTranslate2's ``TransformerSpec`` of a built :class:`~keras_memnmt.models.Transformer`
    and its vocabulary, weights set (see the module docstring for the mapping)."""
    from keras import ops

    from keras_memnmt.models.transformer import LAYER_NORM_EPSILON

    ctranslate2 = _require()
    check_model(model)
    specs = ctranslate2.specs
    spec = specs.TransformerSpec.from_config(
        model.num_layers, model.num_heads, pre_norm=True, activation=specs.Activation.RELU
    )
    dim = model.embedding_dim
    target = np.asarray(model.target_embedding.embeddings, np.float32)  # (V, D)
    target_scale = float(ops.convert_to_numpy(model.target_scale)) if model.tie_embeddings else 1.0
    encoder, decoder = spec.encoder, model.encoder
    if model.share_embeddings:
        source = target * target_scale
    else:
        source = np.asarray(decoder.embedding.embeddings, np.float32) * decoder.lookup_scale
    encoder.embeddings[0].weight = source
    encoder.scale_embeddings = False
    encoder.position_encodings.encodings = _positions(decoder.positions, dim)
    for layer_spec, layer in zip(encoder.layer, decoder.encoder_layers):
        _attention(
            layer_spec.self_attention,
            layer._self_attention_layer,
            layer._self_attention_layer_norm,
            ("query", "key", "value"),
        )
        _ffn(layer_spec.ffn, layer)
    _norm(encoder.layer_norm, decoder.norm)

    out = spec.decoder
    out.embeddings.weight = target * target_scale
    out.scale_embeddings = False
    out.position_encodings.encodings = _positions(model.target_positions, dim)
    for layer_spec, layer in zip(out.layer, model.decoder_layers):
        _attention(
            layer_spec.self_attention,
            layer._self_attention_layer,
            layer._self_attention_layer_norm,
            ("query", "key", "value"),
        )
        _attention(
            layer_spec.attention, layer._cross_attention_layer, layer._cross_attention_layer_norm, ("key", "value")
        )
        _ffn(layer_spec.ffn, layer)
    _norm(out.layer_norm, model.decoder_norm)
    if model.tie_embeddings:
        out.projection.weight = target
    else:
        _linear(out.projection, model.output_layer.kernel)

    spec.config.layer_norm_epsilon = LAYER_NORM_EPSILON
    spec.config.add_source_eos = True
    for side, register in (("source", spec.register_source_vocabulary), ("target", spec.register_target_vocabulary)):
        import sentencepiece as spm

        processor = spm.SentencePieceProcessor(model_proto=getattr(vocab, side).proto)
        register([processor.id_to_piece(i) for i in range(processor.get_piece_size())])
    return spec


def export_ctranslate2(
    run_dir: str, out_dir: str, checkpoint: str | None = None, quantization: str = "float32", overwrite: bool = False
) -> dict:
    """Writes the run's Transformer as a CTranslate2 model directory at ``out_dir``.

    Args:
        run_dir: a run directory of a ``transformer`` model.
        out_dir: the directory to write (made beside it, then renamed into place).
        checkpoint: another model file of the run than ``best.keras``.
        quantization: the weights' type in ``model.bin``: ``float32`` (default) or ``int8``
            (CTranslate2's ``int8_float32``, ``int16`` also taken).
        overwrite: replace an existing ``out_dir``.

    Returns:
        The metadata written to ``memnmt_ctranslate2.json``.
    """
    from keras_memnmt.rundir.loading import load_run

    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}, got {quantization!r}")
    ctranslate2 = _require()
    model, vocab, _ = load_run(run_dir, checkpoint)
    spec = transformer_spec(model, vocab)

    class _Converter(ctranslate2.converters.Converter):
        def _load(self):
            return spec

    metadata = {
        "format": "ctranslate2",
        "ctranslate2_version": ctranslate2.__version__,
        "run": os.path.abspath(run_dir),
        "checkpoint": checkpoint or "best.keras",
        "quantization": quantization,
        "model": type(model).__name__,
        "source_sentencepiece": "source.model",
        "target_sentencepiece": "target.model",
    }
    with atomic_directory(out_dir, overwrite) as tmp:
        _Converter().convert(os.path.join(tmp, "model"), quantization=quantization, force=True)
        for name in os.listdir(os.path.join(tmp, "model")):
            os.rename(os.path.join(tmp, "model", name), os.path.join(tmp, name))
        os.rmdir(os.path.join(tmp, "model"))
        for side in ("source", "target"):
            with open(os.path.join(tmp, f"{side}.model"), "wb") as f:
                f.write(getattr(vocab, side).proto)
        with open(os.path.join(tmp, METADATA_FILE), "w", encoding="utf-8") as f:
            json.dump(metadata, f, indent=2)
            f.write("\n")
    return metadata


class CTranslate2Translator:
    """Strings in, strings out over an exported directory: its SentencePiece models and
    ``ctranslate2.Translator``.

    Example:
        >>> t = CTranslate2Translator("export/ct2")  # doctest: +SKIP
        >>> t.translate(["A dog runs."], beam_size=5)  # doctest: +SKIP
    """

    def __init__(self, path: str, device: str = "cpu", inter_threads: int = 1, intra_threads: int = 0):
        import sentencepiece as spm

        ctranslate2 = _require()
        self.translator = ctranslate2.Translator(
            path, device=device, inter_threads=inter_threads, intra_threads=intra_threads
        )
        self.source = spm.SentencePieceProcessor(model_file=os.path.join(path, "source.model"))
        self.target = spm.SentencePieceProcessor(model_file=os.path.join(path, "target.model"))

    def translate(self, sentences, beam_size: int = 1, max_batch_size: int = 64, **options) -> list[str]:
        """Translations of ``sentences``; ``options`` go to ``translate_batch``
        (``max_decoding_length``, ``length_penalty``, ...)."""
        pieces = self.source.encode(list(sentences), out_type=str)
        results = self.translator.translate_batch(pieces, beam_size=beam_size, max_batch_size=max_batch_size, **options)
        return [self.target.decode_pieces(r.hypotheses[0]) for r in results]
