"""Train a headline summarizer, export it as a SavedModel, score it with ROUGE.

    python train.py --data-dir ../shared/data/gigaword_sample

reads TFDS `gigaword` (prepared offline from the `org_data` folder given by
`--data-dir`; downloaded when no folder is given), trains with checkpoints
(rerun the same command to resume), exports `saved_models/<name>/<version>/`
and writes `metrics.json` and attention heatmaps beside it.
"""

import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv=None):
    from models.config import (
        ATTENTION_CHOICES,
        SearchOptions,
        SummarizerConfig,
        TrainOptions,
    )

    cfg, opt, search = SummarizerConfig(), TrainOptions(), SearchOptions()
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    g = p.add_argument_group("data")
    g.add_argument(
        "--dataset", default="gigaword", help="TFDS dataset name (default: %(default)s)"
    )
    g.add_argument(
        "--data-dir",
        help="local copy of the dataset's source: an org_data folder, "
        "its parent, or ggw_data.zip (offline preparation)",
    )
    g.add_argument(
        "--tfds-dir", help="where TFDS keeps prepared datasets (default: TFDS's own)"
    )
    g.add_argument(
        "--document-key", default="document", help="feature holding the text"
    )
    g.add_argument(
        "--summary-key", default="summary", help="feature holding the headline"
    )

    g = p.add_argument_group("model")
    g.add_argument(
        "--attention",
        default=cfg.attention,
        choices=ATTENTION_CHOICES,
        help="score function of the decoder's attention (default: %(default)s)",
    )
    g.add_argument("--cell", default=cfg.cell, choices=("lstm", "gru"))
    g.add_argument(
        "--copy",
        action=argparse.BooleanOptionalAction,
        default=cfg.copy,
        help="pointer-generator copying (default: on)",
    )
    g.add_argument(
        "--coverage",
        action=argparse.BooleanOptionalAction,
        default=cfg.coverage,
        help="coverage attention and loss (default: off)",
    )
    for name in (
        "vocab_size",
        "embedding_dim",
        "hidden_size",
        "attention_units",
        "max_source_length",
        "max_target_length",
    ):
        g.add_argument(
            "--" + name.replace("_", "-"),
            type=int,
            default=getattr(cfg, name),
            help="(default: %(default)s)",
        )
    g.add_argument(
        "--dropout", type=float, default=cfg.dropout, help="(default: %(default)s)"
    )
    g.add_argument(
        "--tie-embeddings",
        action=argparse.BooleanOptionalAction,
        default=cfg.tie_embeddings,
        help="output layer shares the embeddings",
    )
    g.add_argument(
        "--sampled-softmax",
        type=int,
        default=cfg.sampled_softmax,
        metavar="K",
        help="train the output layer on K vocabulary words sampled per batch "
        "(faster steps: BENCHMARKS.md section 3); 0: full softmax "
        "(default: %(default)s). Evaluation and decoding use the full softmax.",
    )

    g = p.add_argument_group("training")
    g.add_argument(
        "--name", default="headlines", help="model name (default: %(default)s)"
    )
    g.add_argument(
        "--run-dir", help="checkpoints, logs, vocabulary (default: runs/<name>)"
    )
    g.add_argument(
        "--export-dir", help="SavedModel versions (default: saved_models/<name>)"
    )
    for name in (
        "batch_size",
        "epochs",
        "checkpoint_every",
        "patience",
        "min_count",
        "validation_rouge_examples",
        "seed",
    ):
        g.add_argument(
            "--" + name.replace("_", "-"),
            type=int,
            default=getattr(opt, name),
            help="(default: %(default)s)",
        )
    g.add_argument(
        "--steps-per-epoch", type=int, help="(default: the whole training split)"
    )
    g.add_argument("--learning-rate", type=float, default=opt.learning_rate)
    g.add_argument(
        "--max-train-minutes",
        type=float,
        default=opt.max_train_minutes,
        help="stop training after this many minutes; 0: no limit "
        "(default: %(default)s)",
    )
    g.add_argument(
        "--max-train-examples", type=int, help="use only the first N training pairs"
    )
    g.add_argument(
        "--jit-compile", action="store_true", help="XLA-compile the train step"
    )
    g.add_argument("--mixed-precision", choices=("mixed_float16", "mixed_bfloat16"))
    g.add_argument(
        "--strategy",
        choices=("default", "mirrored", "multi_worker"),
        default="default",
        help="tf.distribute strategy",
    )
    g.add_argument(
        "--cpu-devices",
        type=int,
        default=1,
        help="split the CPU into N logical devices (to try --strategy mirrored)",
    )

    g = p.add_argument_group("decoding (baked into the export)")
    g.add_argument("--beam-size", type=int, default=search.beam_size)
    g.add_argument("--length-penalty", type=float, default=search.length_penalty)
    g.add_argument("--min-length", type=int, default=search.min_length)
    g.add_argument("--max-length", type=int, default=search.max_length)
    g.add_argument(
        "--no-repeat-ngram-size", type=int, default=search.no_repeat_ngram_size
    )

    g.add_argument(
        "--suppress-unk",
        action=argparse.BooleanOptionalAction,
        default=search.suppress_unk,
        help="never generate <unk> (default: off: Gigaword's test references "
        "hold UNK, which the model may then match; readable headlines leave it "
        "out)",
    )

    g.add_argument(
        "--tune-decoding",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="choose --length-penalty and --no-repeat-ngram-size by ROUGE-1 "
        "on validation examples after training (default: on; "
        "--no-tune-decoding keeps the values given)",
    )
    g.add_argument(
        "--tune-examples",
        type=int,
        default=500,
        help="validation examples for --tune-decoding (default: %(default)s)",
    )
    g.add_argument(
        "--tune-length-penalties",
        type=float,
        nargs="+",
        default=[0.6, 1.0, 1.5, 2.0],
        help="(default: %(default)s)",
    )
    g.add_argument(
        "--tune-ngram-sizes",
        type=int,
        nargs="+",
        default=[1, 2, 3],
        help="(default: %(default)s)",
    )

    g = p.add_argument_group("evaluation")
    g.add_argument("--eval-split", default="test", help="(default: %(default)s)")
    g.add_argument("--max-eval-examples", type=int, help="score only the first N pairs")
    g.add_argument("--skip-eval", action="store_true", help="export without evaluating")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    from models import pipeline

    try:
        pipeline.run(args)
    except pipeline.LostWorker as error:
        print(f"train.py: error: {error}", file=sys.stderr, flush=True)
        # TensorFlow's shutdown would wait for the lost worker: none of it.
        os._exit(2)
    except pipeline.UserError as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "\ntrain.py: interrupted; run the same command again to resume.",
            file=sys.stderr,
        )
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
