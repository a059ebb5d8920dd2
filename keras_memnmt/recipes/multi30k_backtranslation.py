"""Back-translation on Multi30k (Sennrich et al. 2015, "Improving Neural Machine Translation
Models with Monolingual Data"; Bradbury & Socher 2016 §3): a reverse model translates
target-side monolingual text into the source language, and the forward model is trained
on the real pairs plus these synthetic ones.

Multi30k has no monolingual German of its own, so the recipe makes some. The training
pairs (the first ``train_limit`` of them when it is set) are split in two halves,
:func:`halves`: the first ``n // 2`` pairs are the real parallel data, and the rest are
used only through their German side. The stages, for the config's ``src=en, tgt=de``:

1. ``OUT/reverse``: de→en trained on the real half (``train_limit`` = its size), scored
   on test_2016_flickr de→en. ``--set reverse_run=RUN_DIR`` uses an existing de→en run
   instead.
2. ``OUT/synthetic.de`` and ``OUT/synthetic.en``: the second half's German, and its
   translation by the reverse run's ``best.keras`` with beam ``backtranslation_beam`` (4),
   one line per German sentence; or, with ``bt_decoding=sampling`` or ``topk:K``, a draw
   from the reverse model per sentence (Edunov et al. 2018, "Understanding
   Back-Translation at Scale"), set by the config's ``seed``. The English is appended in chunks, so a stopped stage
   continues after its last complete line; ``OUT/synthetic.json`` records the run, beam
   and sentences that made it.
3. ``OUT/union``: en→de on the real half plus the synthetic pairs (the files
   ``OUT/union.en`` / ``OUT/union.de``, read through the config's ``train_prefix``; a
   synthetic pair whose translation came out empty is dropped and counted).
4. ``OUT/baseline``: en→de on the real half alone, the config otherwise the same.
5. ``OUT/comparison.json`` and ``OUT/comparison.md``: test BLEU, lowercased BLEU and chrF
   of the three runs; the table is also printed.

    memnmt train multi30k_backtranslation --data-dir $MEMNMT_DATA --out runs/bt

Every run is ``multi30k_rnnsearch``'s model and schedule (``--set`` reaches the config's
fields, the model's options and the fields of ``Options`` below; ``reverse_model``
picks another model for the de→en stage). Each run trains its vocabulary on its own
training data, so the union's English vocabulary also sees the synthetic sentences.

A stage whose run directory holds ``results.json`` is finished and skipped, after a check
that it was trained with the same config (a different one is an error: pass
``--overwrite`` or another ``--out``). A stopped training stage continues with
``--resume``; ``--overwrite`` makes every stage again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

from keras_memnmt.config import ConfigError, TrainConfig, validate_model_name
from keras_memnmt.evaluation.translation import translate
from keras_memnmt.recipes.multi30k_rnnsearch import CONFIG as RNNSEARCH
from keras_memnmt.rundir.layout import read_config
from keras_memnmt.rundir.loading import load_run
from keras_memnmt.training import load_corpora, train

CONFIG = RNNSEARCH  # en→de, RNNsearch at the comparison size, for all three runs


@dataclasses.dataclass
class Options:
    """The recipe's own settings (``--set backtranslation_beam=5``)."""

    backtranslation_beam: int = 4  # beam of the reverse model when it makes the synthetic source
    # How the reverse model makes the synthetic source: "beam" (search, backtranslation_beam),
    # or a draw per sentence, "sampling" (the whole distribution) or "topk:K" (Edunov et al. 2018),
    # keyed by the config's seed and the sentence's line (memnmt translate --sampling)
    bt_decoding: str = "beam"
    reverse_model: str | None = None  # the de→en stage's model (None = the config's model and options)
    reverse_epochs: int | None = None  # the de→en stage's epochs (None = the config's epochs)
    reverse_run: str | None = None  # an existing de→en run directory to translate with (no stage 1)
    translate_batch_size: int = 64  # sentences per decoding batch
    chunk_size: int = 1024  # sentences translated between two appends to synthetic.{src}

    def __post_init__(self) -> None:
        for name in ("backtranslation_beam", "translate_batch_size", "chunk_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r}: expected an int >= 1")
        if self.reverse_epochs is not None and self.reverse_epochs < 1:
            raise ConfigError(f"reverse_epochs={self.reverse_epochs!r}: expected an int >= 1 or none")
        if self.reverse_model is not None:
            validate_model_name(self.reverse_model)
        if self.bt_decoding != "beam":
            from keras_memnmt.decoding.common import parse_sampling

            try:
                parse_sampling("full" if self.bt_decoding == "sampling" else self.bt_decoding)
            except ValueError:
                raise ConfigError(f"bt_decoding={self.bt_decoding!r}: expected beam, sampling or topk:K") from None
            if not self.bt_decoding.startswith(("sampling", "topk:")):
                raise ConfigError(f"bt_decoding={self.bt_decoding!r}: expected beam, sampling or topk:K")

    def decoding(self, seed: int) -> dict:
        """The keyword arguments of ``translate`` that make the synthetic source."""
        if self.bt_decoding == "beam":
            return {"beam_size": self.backtranslation_beam}
        return {
            "beam_size": 1,
            "sampling": "full" if self.bt_decoding == "sampling" else self.bt_decoding,
            "seed": seed,
        }


OPTIONS = Options()


def halves(n: int) -> tuple[range, range]:
    """The indices of the real half (the first ``n // 2`` pairs) and of the monolingual
    half (the other ``n - n // 2``) of ``n`` training pairs."""
    if n < 2:
        raise ConfigError(f"back-translation needs at least 2 training pairs, got {n}")
    return range(n // 2), range(n // 2, n)


def stage_configs(config: TrainConfig, options: Options, out_dir: str, real: int) -> dict:
    """The configs of the three training stages: ``reverse`` (tgt→src on the first ``real``
    pairs), ``baseline`` (src→tgt on them) and ``union`` (src→tgt on ``OUT/union.*``)."""
    reverse = config.replace(src=config.tgt, tgt=config.src, train_limit=real)
    if options.reverse_model is not None:
        reverse = reverse.replace(model=options.reverse_model)
    if options.reverse_epochs is not None:
        reverse = reverse.replace(epochs=options.reverse_epochs)
    return {
        "reverse": reverse,
        "baseline": config.replace(train_limit=real),
        "union": config.replace(train_prefix=os.path.join(out_dir, "union"), train_limit=None),
    }


def train_stage(
    config: TrainConfig, run_dir: str, data_dir: str | None, log=print, resume: bool = False, overwrite: bool = False
) -> dict:
    """Trains ``config`` into ``run_dir``, or returns its ``results.json`` when that run is
    finished (and was trained with ``config``)."""
    results = os.path.join(run_dir, "results.json")
    if overwrite or not os.path.isfile(results):
        log(f"back-translation: training {config.src}->{config.tgt} in {run_dir}")
        return train(config, run_dir, data_dir=data_dir, log=log, resume=resume, overwrite=overwrite)
    saved = read_config(run_dir).to_dict()
    wanted = json.loads(json.dumps(config.to_dict()))  # tuples as JSON has them
    changed = sorted(k for k in set(saved) | set(wanted) if saved.get(k) != wanted.get(k))
    if changed:
        raise ConfigError(
            f"{run_dir} is a finished run trained with other settings ("
            + ", ".join(f"{k}={saved.get(k)!r}, now {wanted.get(k)!r}" for k in changed)
            + "); pass --overwrite to train every stage again, or another --out"
        )
    log(f"back-translation: {run_dir} is finished; skipped")
    with open(results) as f:
        return json.load(f)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_lines(path: str, lines: list[str]) -> None:
    """Writes ``lines`` to ``path`` whole or not at all (a temporary file, then a rename)."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    os.replace(path + ".tmp", path)


def _complete_lines(path: str) -> int:
    """The newline-terminated lines of ``path`` (0 when it does not exist); a last line
    cut off by an interruption is removed from the file."""
    if not os.path.isfile(path):
        return 0
    with open(path, "rb+") as f:
        data = f.read()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            f.truncate(end)
    return data[:end].count(b"\n")


def backtranslate(
    reverse_dir: str, sentences: list[str], prefix: str, src: str, tgt: str, options: Options, log=print, seed: int = 0
) -> int:
    """Writes ``sentences`` (target language) to ``{prefix}.{tgt}`` and their translations
    by the run ``reverse_dir`` to ``{prefix}.{src}``, one line each; returns the number of
    sentences translated now (0 when the files were complete).

    The translations are appended ``options.chunk_size`` at a time: a stopped call is
    continued by the next one. ``{prefix}.json`` records what made the files; files made
    from other sentences, another run, another beam or another decoding are a
    :class:`ConfigError`. With ``options.bt_decoding`` other than beam, line ``n`` is drawn
    with the key ``(seed, n, 0)``: a continued call draws what an uninterrupted one would.
    """
    results = os.path.join(reverse_dir, "results.json")
    with open(results if os.path.isfile(results) else os.path.join(reverse_dir, "config.json"), "rb") as f:
        reverse_id = _sha256(f.read())
    # The run's folder relative to the record's own, so that the record names no folder
    # of the machine that made it.
    record = {
        "reverse_run": os.path.relpath(reverse_dir, os.path.dirname(os.path.abspath(prefix))),
        "reverse_run_sha256": reverse_id,
        "beam_size": options.backtranslation_beam,
        "sentences": len(sentences),
        "sentences_sha256": _sha256("\n".join(sentences).encode("utf-8")),
    }
    if options.bt_decoding != "beam":  # files made by beam search keep the record they had
        record.update(decoding=options.bt_decoding, seed=seed)
    meta, target_file, source_file = prefix + ".json", f"{prefix}.{tgt}", f"{prefix}.{src}"
    if os.path.isfile(meta) and os.path.isfile(target_file):
        with open(meta) as f:
            made = json.load(f)
        changed = sorted(k for k in record if made.get(k) != record[k])
        if changed:
            raise ConfigError(
                f"{prefix}.* were made with other {', '.join(changed)} ({made}); pass "
                "--overwrite to make them again, or another --out"
            )
    else:
        with open(meta + ".tmp", "w") as f:
            json.dump(record, f, indent=2)
        os.replace(meta + ".tmp", meta)
        _write_lines(target_file, sentences)
        open(source_file, "w").close()
    done = _complete_lines(source_file)
    if done > len(sentences):
        raise ConfigError(
            f"{source_file} has {done} lines for {len(sentences)} sentences; pass --overwrite to make it again"
        )
    if done == len(sentences):
        log(f"back-translation: {source_file} is complete ({done} lines); skipped")
        return 0
    model, vocab, _ = load_run(reverse_dir)
    how = (
        f"beam {options.backtranslation_beam}"
        if options.bt_decoding == "beam"
        else f"{options.bt_decoding}, seed {seed}"
    )
    log(
        f"back-translation: translating {len(sentences) - done} {tgt} sentences into {source_file} "
        f"with {reverse_dir} ({how}; {done} done before)"
    )
    decoding = options.decoding(seed)
    for start in range(done, len(sentences), options.chunk_size):
        chunk = sentences[start : start + options.chunk_size]
        offset = {"line_offset": start} if "sampling" in decoding else {}
        out = translate(
            model, vocab, chunk, batch_size=options.translate_batch_size, progress=False, **decoding, **offset
        )
        with open(source_file, "a", encoding="utf-8") as f:
            f.write("".join(" ".join(line.split("\n")) + "\n" for line in out))
            f.flush()
            os.fsync(f.fileno())
        log(f"back-translation: {start + len(chunk)} / {len(sentences)} sentences")
    return len(sentences) - done


def _row(results: dict, run_dir: str, direction: str, pairs: str) -> dict:
    keys = (
        "bleu",
        "bleu_lowercase",
        "chrf",
        "ter",
        "best_val_bleu",
        "train_seconds",
        "test_split",
        "beam_size",
        "sentences",
    )
    return {"run_dir": run_dir, "direction": direction, "training_pairs": pairs, **{k: results.get(k) for k in keys}}


def run(
    config: TrainConfig,
    out_dir: str,
    options: Options = OPTIONS,
    data_dir: str | None = None,
    log=print,
    resume: bool = False,
    overwrite: bool = False,
) -> str:
    """The stages of the module docstring; returns the comparison table (markdown)."""
    if config.corpus == "synthetic":
        raise ConfigError("multi30k_backtranslation needs a language pair: corpus='multi30k', got corpus='synthetic'")
    if resume and overwrite:
        raise ConfigError("resume and overwrite exclude each other")
    config, out_dir = config.replace(corpus="multi30k"), os.path.normpath(out_dir)
    if overwrite:
        for name in (
            "synthetic.json",
            f"synthetic.{config.src}",
            f"synthetic.{config.tgt}",
            f"union.{config.src}",
            f"union.{config.tgt}",
            "comparison.json",
            "comparison.md",
        ):
            if os.path.isfile(os.path.join(out_dir, name)):
                os.remove(os.path.join(out_dir, name))
    os.makedirs(out_dir, exist_ok=True)
    pool = load_corpora(config, data_dir, log)[0]
    real, mono = halves(len(pool))
    log(
        f"back-translation: of {len(pool)} training pairs, {len(real)} real and {len(mono)} used "
        f"through their {config.tgt} side only"
    )
    configs = stage_configs(config, options, out_dir, len(real))
    common = dict(data_dir=data_dir, log=log, resume=resume, overwrite=overwrite)
    # 1. the reverse model
    if options.reverse_run is None:
        reverse_dir = os.path.join(out_dir, "reverse")
        reverse = train_stage(configs["reverse"], reverse_dir, **common)
    else:
        reverse_dir = options.reverse_run
        saved = read_config(reverse_dir)
        if (saved.src, saved.tgt) != (config.tgt, config.src):
            raise ConfigError(
                f"reverse_run {reverse_dir} translates {saved.src}->{saved.tgt}; expected {config.tgt}->{config.src}"
            )
        path, reverse = os.path.join(reverse_dir, "results.json"), {}
        if os.path.isfile(path):
            with open(path) as f:
                reverse = json.load(f)
    # 2. the synthetic pairs
    german = [pool.target[i] for i in mono]
    synthetic = os.path.join(out_dir, "synthetic")
    backtranslate(reverse_dir, german, synthetic, config.src, config.tgt, options, log, seed=config.seed)
    # 3. the union, 4. the baseline
    union_files = configs["union"].train_prefix
    if overwrite or not os.path.isfile(os.path.join(out_dir, "union", "results.json")):
        with open(f"{synthetic}.{config.src}", encoding="utf-8") as f:
            made = f.read().splitlines()
        _write_lines(f"{union_files}.{config.src}", [pool.source[i] for i in real] + made)
        _write_lines(f"{union_files}.{config.tgt}", [pool.target[i] for i in real] + german)
    union = train_stage(configs["union"], os.path.join(out_dir, "union"), **common)
    baseline = train_stage(configs["baseline"], os.path.join(out_dir, "baseline"), **common)
    # 5. the comparison
    forward, backward = f"{config.src}->{config.tgt}", f"{config.tgt}->{config.src}"
    comparison = {
        "reverse": _row(reverse, reverse_dir, backward, f"{len(real)} real"),
        "baseline": _row(baseline, os.path.join(out_dir, "baseline"), forward, f"{len(real)} real"),
        "union": _row(union, os.path.join(out_dir, "union"), forward, f"{len(real)} real + {len(mono)} synthetic"),
        "real_pairs": len(real),
        "synthetic_pairs": len(mono),
        "backtranslation_beam": options.backtranslation_beam,
        "union_minus_baseline": {k: round(union[k] - baseline[k], 2) for k in ("bleu", "bleu_lowercase", "chrf")},
    }
    with open(os.path.join(out_dir, "comparison.json"), "w") as f:
        json.dump(comparison, f, indent=2)
    fmt = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731
    table = ["| run | direction | training pairs | BLEU | lowercased BLEU | chrF |", "|---|---|---|---|---|---|"]
    table += [
        f"| {name} | {r['direction']} | {r['training_pairs']} | {fmt(r['bleu'])} | "
        f"{fmt(r['bleu_lowercase'])} | {fmt(r['chrf'])} |"
        for name, r in ((n, comparison[n]) for n in ("reverse", "baseline", "union"))
    ]
    with open(os.path.join(out_dir, "comparison.md"), "w") as f:
        f.write("\n".join(table) + "\n")
    return "\n".join(table)
