"""Translation time and peak memory of an ensemble: four members, beam 16, average length normalization.

    KERAS_BACKEND=tensorflow python benchmarks/ensemble_speed.py --sentences 100
    KERAS_BACKEND=jax python benchmarks/ensemble_speed.py --run runs/a --run runs/b --run runs/c --run runs/d

The paper's decoding setting (beam 16, scores divided by the length) over the first
``--sentences`` of Multi30k test_2016_flickr. With ``--run`` (repeated) the ensemble is
those trained runs (their best.keras; the first run's vocabulary), and the BLEU of the
last pass is printed too. Without it the ensemble is ``--members`` untrained models of
the multi30k_rnnsearch recipe's size, on a vocabulary of the recipe's size trained on
the first ``--vocab-pairs`` training pairs: untrained models translate up to the length
limit, so this times the longest search (timing is what is measured, not quality).

Prints one ``name=value`` line per figure: ``pass{N}_seconds`` (the first pass includes
tracing / compiling the search), ``sentences_per_second`` of the last pass, and
``peak_rss_mb``, the process's resident-memory high-water mark (``getrusage``) after the
models are loaded (``loaded_peak_rss_mb``) and after translating.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def peak_rss_mb() -> float:
    """The resident-set high-water mark of this process, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def untrained_members(count: int, data_dir: str, vocab_pairs: int):
    """``count`` untrained models of the multi30k_rnnsearch recipe, and a vocabulary of its size."""
    import keras

    from keras_memnmt.config import build_model
    from keras_memnmt.data import SubwordVocab, load_multi30k

    sys.path.insert(0, REPO)  # the recipes folder
    from keras_memnmt.recipes.multi30k_rnnsearch import CONFIG

    train = load_multi30k(CONFIG.src, CONFIG.tgt, "train", data_dir=data_dir).take(vocab_pairs)
    vocab = SubwordVocab.train(train.source, train.target, size=CONFIG.vocab_size, model_type=CONFIG.vocab_type)
    members = []
    for seed in range(count):
        keras.utils.set_random_seed(seed)  # members differ, as independently trained ones do
        model = build_model(CONFIG, vocab.source.vocab_size, vocab.target.vocab_size)
        model.build_weights()
        members.append(model)
    return members, vocab, CONFIG


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", action="append", help="a run directory from `memnmt train` (repeat: one per member)")
    p.add_argument("--members", type=int, default=4, help="untrained members without --run (default 4)")
    p.add_argument(
        "--data-dir",
        default=os.environ.get("MEMNMT_DATA"),
        help="local Multi30k folder (default: $MEMNMT_DATA, else the cache, else a download)",
    )
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--sentences", type=int, help="translate the first N sentences (default: all)")
    p.add_argument("--beam", type=int, default=16)
    p.add_argument("--length-penalty", choices=("gnmt", "average", "none"), default="average")
    p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--passes", type=int, default=1)
    p.add_argument(
        "--vocab-pairs", type=int, default=10000, help="training pairs the untrained members' vocabulary is trained on"
    )
    args = p.parse_args()
    if args.passes < 1 or args.beam < 1 or args.members < 1 or (args.sentences or 1) < 1:
        p.error("--passes, --beam, --members and --sentences must be >= 1")

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from keras_memnmt.runtime import import_tensorflow_without_jax, tune_malloc

    tune_malloc()  # as the `memnmt` command does
    import_tensorflow_without_jax()

    import keras

    from keras_memnmt.data import CorpusError, DownloadError, load_multi30k
    from keras_memnmt.evaluation.translation import score, translate
    from keras_memnmt.models import Ensemble
    from keras_memnmt.rundir.runs import load_ensemble

    try:  # a missing run, mismatched vocabularies, a missing split: the message, not a traceback
        if args.run:
            model, vocab, config = load_ensemble(args.run)
            members = len(args.run)
        else:
            models, vocab, config = untrained_members(args.members, args.data_dir, args.vocab_pairs)
            model = Ensemble(models, name="ensemble") if len(models) > 1 else models[0]
            members = len(models)
        test = load_multi30k(config.src, config.tgt, args.split, data_dir=args.data_dir).take(args.sentences)
    except (FileNotFoundError, ValueError, CorpusError, DownloadError) as error:
        p.error(str(error))
    print(f"backend={keras.backend.backend()}")
    print(f"members={members}")
    print(f"trained={bool(args.run)}")
    print(f"beam={args.beam}")
    print(f"length_penalty={args.length_penalty}")
    print(f"sentences={len(test.source)}")
    print(f"loaded_peak_rss_mb={peak_rss_mb():.0f}", flush=True)
    for n in range(1, args.passes + 1):
        start = time.perf_counter()
        hyps = translate(
            model,
            vocab,
            test.source,
            beam_size=args.beam,
            batch_size=args.batch_size,
            length_penalty=args.length_penalty,
            alpha=args.alpha,
            progress=False,
        )
        seconds = time.perf_counter() - start
        print(f"pass{n}_seconds={seconds:.2f}", flush=True)
    print(f"sentences_per_second={len(test.source) / seconds:.2f}")
    print(f"peak_rss_mb={peak_rss_mb():.0f}")
    if args.run:
        print(f"bleu={score(hyps, test.target)['bleu']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
