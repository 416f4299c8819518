"""Validation ROUGE-1 of a trained run over a grid of decoding settings.

What `train.py` does after training (`models.tuning.tune_search_options`),
on a run folder that exists, with any grid: to compare runs (one model
against an ensemble) on the same validation examples and settings.

    python benchmarks/tune_grid.py --run-dir runs/headlines \
        --data-dir ../shared/data/gigaword_sample \
        --length-penalties 2.0 2.5 3.0 --ngram-sizes 1

`--beam-sizes` and `--min-lengths` repeat the grid for each value.
"""

import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


from models.config import SearchOptions  # noqa: E402  (no TensorFlow)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("--length-penalties", type=float, nargs="+", default=[2.0])
    parser.add_argument("--ngram-sizes", type=int, nargs="+", default=[1])
    parser.add_argument(
        "--beam-sizes", type=int, nargs="+", default=[SearchOptions.beam_size]
    )
    parser.add_argument(
        "--min-lengths", type=int, nargs="+", default=[SearchOptions.min_length]
    )
    args = parser.parse_args(argv)

    from models import data, tuning
    from models.runs import load_run, load_trained_model

    _, features = load_run(args.run_dir)
    model = load_trained_model(args.run_dir)
    validation = data.load_split("validation", data_dir=args.data_dir)
    pairs = list(validation.take(args.examples).as_numpy_iterator())
    documents = [d for d, _ in pairs]
    references = [s.decode("utf-8") for _, s in pairs]
    members = len(getattr(model, "members", [model]))
    print(f"{args.run_dir}: {members} model(s), {len(pairs)} validation examples")
    for beam_size in args.beam_sizes:
        for min_length in args.min_lengths:
            chosen, rows = tuning.tune_search_options(
                model,
                features,
                documents,
                references,
                SearchOptions(beam_size=beam_size, min_length=min_length),
                args.length_penalties,
                args.ngram_sizes,
            )
            print(f"beam {beam_size}, min_length {min_length}:", flush=True)
            print(tuning.format_rows(rows, chosen), flush=True)


if __name__ == "__main__":
    main()
