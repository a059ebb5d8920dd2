"""Translation speed of an exported SavedModel against the Python path, on the same run.

    KERAS_BACKEND=tensorflow python benchmarks/export_speed.py --run runs/rnnsearch \
        --data-dir $MEMNMT_DATA

Exports ``--run`` (``keras_memnmt.export.export_runs``, beam 5 by default) into a
temporary folder, loads it with ``tf.saved_model.load`` and translates the Multi30k
``--split`` source sentences (test_2016_flickr: 1,000) ``--batch-size`` at a time
through its ``translate`` signature, then translates them with
``keras_memnmt.evaluation.translation.translate`` (which sorts the sentences by length before
batching them). The SavedModel is timed twice per pass: on the batches in input order
(what a client sending requests gets) and on the same length-sorted batches as the
Python path.

Prints one ``name=value`` line per figure: ``export_seconds``, ``load_seconds``,
``{path}_pass{N}_seconds`` (the first pass includes tracing / graph optimization) and
``{path}_sentences_per_second`` of the last pass, for ``savedmodel``,
``savedmodel_sorted`` and ``python``, and ``identical_translations``, how many of the
SavedModel's translations equal the Python path's. It never asserts.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", required=True, help="a run directory from `memnmt train`")
    p.add_argument(
        "--data-dir",
        default=os.environ.get("MEMNMT_DATA"),
        help="local Multi30k folder (default: $MEMNMT_DATA, else the cache, else a download)",
    )
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--limit", type=int, help="only the first N sentences")
    args = p.parse_args()
    if args.beam < 1 or args.batch_size < 1 or args.passes < 1:
        p.error("--beam, --batch-size and --passes must be >= 1")

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_memnmt.runtime import import_tensorflow_without_jax, tune_malloc

    tune_malloc()  # as the `memnmt` command does
    import_tensorflow_without_jax()

    import keras
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the SavedModel uses)

    from keras_memnmt.data import CorpusError, DownloadError, load_multi30k
    from keras_memnmt.evaluation.translation import encode_sources, translate
    from keras_memnmt.export import export_runs
    from keras_memnmt.rundir.runs import load_run

    try:  # a missing or incomplete run, a missing split: the message, not a traceback
        model, vocab, config = load_run(args.run)
        test = load_multi30k(config.src, config.tgt, args.split, data_dir=args.data_dir)
    except (FileNotFoundError, ValueError, CorpusError, DownloadError) as error:
        p.error(str(error))
    sentences = test.source[: args.limit] if args.limit else test.source
    print(f"backend={keras.backend.backend()}")
    print(f"sentences={len(sentences)}")
    print(f"beam={args.beam}")

    with tempfile.TemporaryDirectory(prefix="memnmt-export-speed-") as tmp:
        out = os.path.join(tmp, "translator")
        start = time.perf_counter()
        export_runs([args.run], out, beam_size=args.beam)
        print(f"export_seconds={time.perf_counter() - start:.2f}", flush=True)
        start = time.perf_counter()
        signature = tf.saved_model.load(out).signatures["translate"]
        print(f"load_seconds={time.perf_counter() - start:.2f}", flush=True)

        lengths = [len(ids) for ids in encode_sources(vocab, sentences)]
        by_length = sorted(range(len(sentences)), key=lambda i: lengths[i])
        orders = {"savedmodel": list(range(len(sentences))), "savedmodel_sorted": by_length}
        exported = {}
        for name, order in orders.items():
            for n in range(1, args.passes + 1):
                start = time.perf_counter()
                results = [""] * len(sentences)
                for first in range(0, len(order), args.batch_size):
                    rows = order[first : first + args.batch_size]
                    out_batch = signature(sentences=tf.constant([sentences[i] for i in rows]))
                    for i, text in zip(rows, out_batch["translation"].numpy()):
                        results[i] = text.decode("utf-8")
                seconds = time.perf_counter() - start
                print(f"{name}_pass{n}_seconds={seconds:.2f}", flush=True)
            print(f"{name}_sentences_per_second={len(sentences) / seconds:.1f}", flush=True)
            exported[name] = results

    for n in range(1, args.passes + 1):
        start = time.perf_counter()
        python = translate(model, vocab, sentences, beam_size=args.beam, batch_size=args.batch_size, progress=False)
        seconds = time.perf_counter() - start
        print(f"python_pass{n}_seconds={seconds:.2f}", flush=True)
    print(f"python_sentences_per_second={len(sentences) / seconds:.1f}")
    same = sum(a == b for a, b in zip(exported["savedmodel"], python))
    print(f"identical_translations={same}/{len(sentences)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
