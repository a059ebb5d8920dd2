"""Translation speed against OpenNMT-py and CTranslate2 on the same machine, one after the other.

    KERAS_BACKEND=tensorflow python benchmarks/translate_side_by_side.py --data-dir $MEMNMT_DATA \
        --peer-venv VENV --run-rnn RUN --run-transformer RUN [--steps 1000] [--peers rnn,transformer]

``VENV`` is a virtual environment with OpenNMT-py 3.5.1, its CTranslate2 and sacremoses
(OpenNMT-py declares ``torch<2.3``: install ``torch==2.13.0`` first, then ``opennmt-py``
with ``--no-deps`` and its other requirements). The stages, never two at a time:

1. the peer's data: test_2016_flickr and the training and validation pairs lowercased
   and Moses-tokenized (sacremoses, as OpenNMT-py's Multi30k examples), in ``--work``;
2. OpenNMT-py trains, for ``--steps`` updates of 64 sentences each (its own
   ``onmt_build_vocab`` and ``onmt_train``), its RNN at RNNsearch's shape (bidirectional
   GRU 256+256, GRU 512 decoder, additive attention, embeddings 256) and a Transformer at
   the ``multi30k_transformer`` recipe's (3 layers, d 256, 4 heads, FFN 1024, tied output);
   ``--peers`` names which of the two (default both);
3. the Transformer is converted to CTranslate2 in float32 and in int8
   (``ct2-opennmt-py-converter``);
4. each system translates test_2016_flickr greedy and with beam 5, ``--batch-size``
   sentences per batch (default 64) on ``--threads`` threads (default 2): ``onmt_translate``
   (its own ``-report_time`` total, start-up excluded), CTranslate2's ``translate_batch``
   (timed around the call), and this library's ``translate`` on ``--run-rnn`` and
   ``--run-transformer`` (two passes in one process; the second is the figure, the first,
   with tracing, is printed as ``_first_pass_seconds``).

5. ``--run-transformer`` exported by ``memnmt export --format ctranslate2`` (float32 and
   int8, in ``--work``) and translated by CTranslate2 in this process
   (``ours_ctranslate2_{float32|int8}_*``; ``..._same_as_keras``: the share of its
   translations equal to the Keras search's, greedy and beam 5; CTranslate2's beam search
   normalizes by length as fairseq does, the Keras one by GNMT's penalty).

Per system and search: ``{system}_{greedy|beam5}_seconds``, ``_sentences_per_second``,
``_target_words_per_second`` (whitespace words of the detokenized output, so that outputs
of different lengths compare) and ``_bleu_lc`` (sacreBLEU, lowercased, against the raw
references: the peers are trained on lowercased text). Then the ratios:
``rnn_{search}_vs_opennmt`` (our RNN's sentences/s over OpenNMT-py's RNN's) and
``transformer_{search}_vs_ctranslate2_float32`` / ``_int8``. The systems are trained for
different lengths of time (the peers for ``--steps`` updates, ours by their recipes), so
their BLEU differ; the words per second say whether a speed comes from shorter outputs.
One ``name=value`` line per figure; nothing is asserted. A stage that fails prints
``{stage}_error=...`` and the figures that need it are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SPLITS = (("train", "train"), ("val", "val"), ("test", "test_2016_flickr"))

COMMON = """\
save_data: "{run}/data"
src_vocab: "{run}/vocab.en"
tgt_vocab: "{run}/vocab.de"
overwrite: true
seed: 42
data:
  corpus_1:
    path_src: "{data}/tok.train.en"
    path_tgt: "{data}/tok.train.de"
  valid:
    path_src: "{data}/tok.val.en"
    path_tgt: "{data}/tok.val.de"
src_vocab_size: 10000
tgt_vocab_size: 10000
src_words_min_frequency: 2
tgt_words_min_frequency: 2
src_seq_length: 100
tgt_seq_length: 100
model_type: text
batch_type: sents
batch_size: 64
valid_batch_size: 64
normalization: tokens
accum_count: [1]
num_workers: 0
train_steps: {steps}
valid_steps: {steps}
save_checkpoint_steps: {steps}
keep_checkpoint: 1
save_model: "{run}/model"
report_every: 50
log_file: "{run}/train.log"
model_dtype: fp32
param_init: 0.0
param_init_glorot: true
"""

# RNNsearch's shape in OpenNMT-py's terms (the side-by-side training benchmark's model).
RNN = """\
encoder_type: brnn
decoder_type: rnn
rnn_type: GRU
enc_layers: 1
dec_layers: 1
word_vec_size: 256
enc_hid_size: 512
dec_hid_size: 512
global_attention: mlp
input_feed: 1
bridge: true
dropout: [0.3]
attention_dropout: [0.0]
optim: adam
learning_rate: 0.001
decay_method: none
max_grad_norm: 1.0
"""

# multi30k_transformer's shape: 3 layers, d 256, 4 heads, FFN 1024, tied output embedding.
TRANSFORMER = """\
encoder_type: transformer
decoder_type: transformer
position_encoding: true
self_attn_type: scaled-dot  # CTranslate2 converts no other (OpenNMT-py 3.5.1's default is scaled-dot-flash)
enc_layers: 3
dec_layers: 3
heads: 4
hidden_size: 256
word_vec_size: 256
transformer_ff: 1024
dropout: [0.1]
attention_dropout: [0.1]
share_decoder_embeddings: true
optim: adam
adam_beta2: 0.998
decay_method: noam
# The multi30k_transformer recipe's schedule at 64-sentence batches: a warm-up over 300 updates
# to 1e-3 (0.28 · 256^-0.5 · 300^-0.5), then 1/sqrt(step). OpenNMT-py's usual 2.0 with these
# batches and so few updates peaks near 7e-3 and gave 3 lc BLEU after 1,000 updates.
learning_rate: 0.28
warmup_steps: 300
max_grad_norm: 0.0
label_smoothing: 0.1
"""

# Run in the peer's environment: sacremoses and CTranslate2 live there, not here.
TOKENIZE = """\
import sys
from sacremoses import MosesTokenizer
tok = MosesTokenizer(lang=sys.argv[1])
for line in sys.stdin:
    print(tok.tokenize(line.strip().lower(), escape=False, return_str=True))
"""
DETOKENIZE = """\
import sys
from sacremoses import MosesDetokenizer
detok = MosesDetokenizer(lang="de")
for line in sys.stdin:
    print(detok.detokenize(line.split()))
"""
CT2_TRANSLATE = """\
import json, sys, time
import ctranslate2
model, source, output, beam, batch, threads = sys.argv[1:7]
translator = ctranslate2.Translator(model, device="cpu", inter_threads=1, intra_threads=int(threads))
lines = [line.split() for line in open(source, encoding="utf-8")]
start = time.perf_counter()
results = translator.translate_batch(lines, beam_size=int(beam), max_batch_size=int(batch),
                                     max_decoding_length=100)
seconds = time.perf_counter() - start
with open(output, "w", encoding="utf-8") as f:
    for r in results:
        f.write(" ".join(r.hypotheses[0]) + "\\n")
print(json.dumps({"seconds": seconds}))
"""


def peer(venv: str, tool: str) -> str:
    return os.path.join(venv, "bin", tool)


def run(cmd: list[str], env: dict | None = None, stdin: str | None = None, both: bool = False) -> str:
    """Runs a stage's command and returns its stdout (with ``both``, stdout then stderr); the
    end of its output is in the error when it fails."""
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env)
    if done.returncode:
        tail = (done.stderr or done.stdout)[-600:]
        raise RuntimeError(f"{os.path.basename(cmd[0])} exited {done.returncode}: {tail.strip()}")
    return done.stdout + done.stderr if both else done.stdout


def prepare_data(args, env: dict) -> str:
    """The peers' lowercased, Moses-tokenized text in ``WORK/data``; returns that folder."""
    from keras_memnmt.data import load_multi30k

    folder = os.path.join(args.work, "data")
    os.makedirs(folder, exist_ok=True)
    python = peer(args.peer_venv, "python")
    for short, split in SPLITS:
        corpus = load_multi30k("en", "de", split, data_dir=args.data_dir)
        for lang, lines in (("en", corpus.source), ("de", corpus.target)):
            path = os.path.join(folder, f"tok.{short}.{lang}")
            if not os.path.exists(path):
                text = run([python, "-c", TOKENIZE, lang], env=env, stdin="\n".join(lines) + "\n")
                with open(path + ".part", "w", encoding="utf-8") as f:
                    f.write(text)
                os.replace(path + ".part", path)
    return folder


def train_peer(args, env: dict, data: str, name: str, model: str) -> str:
    """OpenNMT-py trains ``model`` for ``--steps`` updates; returns its checkpoint."""
    folder = os.path.join(args.work, name)
    checkpoint = os.path.join(folder, f"model_step_{args.steps}.pt")
    if os.path.exists(checkpoint):
        return checkpoint
    os.makedirs(folder, exist_ok=True)
    config = os.path.join(folder, "config.yaml")
    with open(config, "w", encoding="utf-8") as f:
        f.write(COMMON.format(run=folder, data=data, steps=args.steps) + model)
    run([peer(args.peer_venv, "onmt_build_vocab"), "-config", config, "-n_sample", "-1"], env=env)
    start = time.perf_counter()
    run([peer(args.peer_venv, "onmt_train"), "-config", config], env=env)
    print(f"opennmt_{name}_train_seconds={time.perf_counter() - start:.1f}", flush=True)
    return checkpoint


OUTPUTS: dict[str, list[str]] = {}  # each system's translations, by name


def report(name: str, seconds: float, hypotheses: list[str], references: list[str], figures: dict) -> None:
    from keras_memnmt.evaluation.translation import score

    n = len(hypotheses)
    figures[name] = n / seconds
    OUTPUTS[name] = list(hypotheses)
    bleu = score(hypotheses, references)["bleu_lowercase"]  # the library's lowercased 13a BLEU
    count = sum(len(h.split()) for h in hypotheses)
    for key, value in (
        ("seconds", f"{seconds:.2f}"),
        ("sentences_per_second", f"{n / seconds:.1f}"),
        ("target_words_per_second", f"{count / seconds:.1f}"),
        ("bleu_lc", f"{bleu:.2f}"),
    ):
        print(f"{name}_{key}={value}", flush=True)


def detokenized(args, env: dict, path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return run([peer(args.peer_venv, "python"), "-c", DETOKENIZE], env=env, stdin=text).splitlines()


def export_ours(args, test, searches, figures: dict) -> None:
    """Our Transformer exported by ``memnmt export --format ctranslate2`` (float32, int8) and
    translated by CTranslate2 in this process, timed around ``CTranslate2Translator.translate``
    (SentencePiece included): ``ours_ctranslate2_{q}_{search}_*``, and
    ``ours_ctranslate2_{q}_greedy_same_as_keras``, the share of greedy translations equal to
    ours (``ours_transformer_greedy``, whose outputs ``report`` keeps)."""
    try:
        from keras_memnmt.export.ctranslate2 import CTranslate2Translator, export_ctranslate2
    except ImportError as error:
        print(f"ours_ctranslate2_error={error}", flush=True)
        return
    for quantization in ("float32", "int8"):
        out = os.path.join(args.work, f"ours_ct2_{quantization}")
        try:
            if not os.path.exists(os.path.join(out, "model.bin")):
                export_ctranslate2(args.run_transformer, out, quantization=quantization)
            translator = CTranslate2Translator(out, intra_threads=args.threads)
        except (ImportError, OSError, ValueError, RuntimeError) as error:
            print(f"ours_ctranslate2_{quantization}_error={error}", flush=True)
            continue
        for search, beam in searches:
            system = f"ours_ctranslate2_{quantization}_{search}"
            translator.translate(test.source[:64], beam_size=beam)  # warm-up
            start = time.perf_counter()
            hyps = translator.translate(
                test.source, beam_size=beam, max_batch_size=args.batch_size, max_decoding_length=200
            )
            report(system, time.perf_counter() - start, hyps, test.target, figures)
            keras_hyps = OUTPUTS.get(f"ours_transformer_{search}")
            if keras_hyps is not None:
                same = sum(a == b for a, b in zip(hyps, keras_hyps)) / len(hyps)
                print(f"{system}_same_as_keras={same:.4f}", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data-dir",
        default=os.environ.get("MEMNMT_DATA"),
        help="local Multi30k folder (default: $MEMNMT_DATA, else the cache, else a download)",
    )
    p.add_argument(
        "--peer-venv",
        default=os.environ.get("MEMNMT_OPENNMT_VENV"),
        help="a virtual environment with OpenNMT-py 3.5.1, CTranslate2 and sacremoses (default: $MEMNMT_OPENNMT_VENV)",
    )
    p.add_argument("--run-rnn", help="our RNNsearch run (memnmt train multi30k_rnnsearch ...)")
    p.add_argument("--run-transformer", help="our Transformer run (memnmt train multi30k_transformer ...)")
    p.add_argument(
        "--peers",
        default="rnn,transformer",
        help="which OpenNMT-py models to train and time (comma-separated, of rnn and transformer; "
        "the CTranslate2 rows need transformer)",
    )
    p.add_argument("--steps", type=int, default=1000, help="OpenNMT-py's training updates per model")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per translation batch, every system")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--work",
        default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "memnmt-translate-side-by-side"),
        help="the peers' data, models and outputs (kept, and reused when run again)",
    )
    args = p.parse_args()
    if not args.peer_venv or not os.path.exists(peer(args.peer_venv, "onmt_train")):
        p.error("--peer-venv: a virtual environment with OpenNMT-py's onmt_train is needed")
    if args.steps < 1 or args.batch_size < 1 or args.threads < 1:
        p.error("--steps, --batch-size and --threads must be >= 1")
    peers = [name.strip() for name in args.peers.split(",") if name.strip()]
    if not set(peers) <= {"rnn", "transformer"}:
        p.error(f"--peers: {args.peers!r} names a model other than rnn and transformer")

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(args.threads),
        "MKL_NUM_THREADS": str(args.threads),
        # OpenNMT-py 3.5.1 loads its own checkpoints with torch.load's old default.
        "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",
    }
    env.pop("KERAS_BACKEND", None)
    os.makedirs(args.work, exist_ok=True)
    from keras_memnmt.data import load_multi30k

    test = load_multi30k("en", "de", "test_2016_flickr", data_dir=args.data_dir)
    print(f"sentences={len(test.source)}", flush=True)
    print(f"batch_size={args.batch_size}", flush=True)
    print(f"threads={args.threads}", flush=True)
    figures: dict[str, float] = {}
    searches = (("greedy", 1), ("beam5", 5))

    try:
        data = prepare_data(args, env)
    except (RuntimeError, OSError) as error:
        print(f"data_error={error}")
        data = None
    checkpoints = {}
    for name, model in (("rnn", RNN), ("transformer", TRANSFORMER)):
        if data is None:
            break
        if name not in peers:
            continue
        try:
            checkpoints[name] = train_peer(args, env, data, name, model)
        except (RuntimeError, OSError) as error:
            print(f"opennmt_{name}_train_error={error}", flush=True)
    ct2 = {}
    if "transformer" in checkpoints:
        for quantization in ("float32", "int8"):
            out = os.path.join(args.work, f"ct2_{quantization}")
            try:
                if not os.path.exists(os.path.join(out, "model.bin")):
                    run(
                        [
                            peer(args.peer_venv, "ct2-opennmt-py-converter"),
                            "--model_path",
                            checkpoints["transformer"],
                            "--output_dir",
                            out,
                            "--quantization",
                            quantization,
                            "--force",
                            "--unsafe_deserialization",
                        ],
                        env=env,
                    )  # the checkpoint is the one trained above
                ct2[quantization] = out
            except (RuntimeError, OSError) as error:
                print(f"ctranslate2_{quantization}_convert_error={error}", flush=True)

    source = os.path.join(data, "tok.test.en") if data else None
    for search, beam in searches:
        for name, checkpoint in checkpoints.items():
            system = f"opennmt_{name}_{search}"
            output = os.path.join(args.work, f"{system}.txt")
            try:
                log = run(
                    [
                        peer(args.peer_venv, "onmt_translate"),
                        "-model",
                        checkpoint,
                        "-src",
                        source,
                        "-output",
                        output,
                        "-beam_size",
                        str(beam),
                        "-batch_size",
                        str(args.batch_size),
                        "-batch_type",
                        "sents",
                        "-max_length",
                        "100",
                        "-report_time",
                    ],
                    env=env,
                    both=True,
                )
                total = [line for line in log.splitlines() if "Total translation time" in line]
                if not total:
                    raise RuntimeError("onmt_translate printed no 'Total translation time'")
                seconds = float(total[-1].rsplit(":", 1)[1])
                report(system, seconds, detokenized(args, env, output), test.target, figures)
            except (RuntimeError, OSError, ValueError) as error:
                print(f"{system}_error={error}", flush=True)
        for quantization, model_dir in ct2.items():
            system = f"ctranslate2_{quantization}_{search}"
            output = os.path.join(args.work, f"{system}.txt")
            try:
                out = run(
                    [
                        peer(args.peer_venv, "python"),
                        "-c",
                        CT2_TRANSLATE,
                        model_dir,
                        source,
                        output,
                        str(beam),
                        str(args.batch_size),
                        str(args.threads),
                    ],
                    env=env,
                )
                seconds = json.loads(out.strip().splitlines()[-1])["seconds"]
                report(system, seconds, detokenized(args, env, output), test.target, figures)
            except (RuntimeError, OSError, ValueError) as error:
                print(f"{system}_error={error}", flush=True)

    ours = [(name, path) for name, path in (("rnn", args.run_rnn), ("transformer", args.run_transformer)) if path]
    if ours:
        from keras_memnmt.evaluation.translation import translate
        from keras_memnmt.rundir.runs import load_run

        for name, path in ours:
            try:
                model, vocab, _ = load_run(path)
            except (FileNotFoundError, ValueError) as error:
                print(f"ours_{name}_error={error}", flush=True)
                continue
            for search, beam in searches:
                system = f"ours_{name}_{search}"
                for attempt in ("first_pass", "second_pass"):
                    start = time.perf_counter()
                    hyps = translate(
                        model, vocab, test.source, beam_size=beam, batch_size=args.batch_size, progress=False
                    )
                    seconds = time.perf_counter() - start
                    if attempt == "first_pass":
                        print(f"{system}_first_pass_seconds={seconds:.2f}", flush=True)
                    else:
                        report(system, seconds, hyps, test.target, figures)

    if args.run_transformer:
        export_ours(args, test, searches, figures)

    for search, _ in searches:
        pairs = [(f"rnn_{search}_vs_opennmt", f"ours_rnn_{search}", f"opennmt_rnn_{search}")]
        pairs += [
            (f"transformer_{search}_vs_ctranslate2_{q}", f"ours_transformer_{search}", f"ctranslate2_{q}_{search}")
            for q in ("float32", "int8")
        ]
        pairs += [(f"transformer_{search}_vs_opennmt", f"ours_transformer_{search}", f"opennmt_transformer_{search}")]
        pairs += [
            (
                f"transformer_ctranslate2_{q}_{search}_vs_ctranslate2_{q}",
                f"ours_ctranslate2_{q}_{search}",
                f"ctranslate2_{q}_{search}",
            )
            for q in ("float32", "int8")
        ]
        for label, a, b in pairs:
            if a in figures and b in figures:
                print(f"{label}={figures[a] / figures[b]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
