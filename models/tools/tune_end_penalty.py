"""Greedy search's end penalty, chosen on validation for a finished run.

`train.py` tunes `greedy_end_penalty` after the beam's settings; a run
trained before that option existed has none. This tunes it the same way
(`models.decoding.tuning.tune_greedy_end_penalty`, on the first `--examples`
validation pairs, the run's own tuned settings kept) and writes the chosen
settings as a `--search-options` file for `python -m models.export`:

```
python -m models.tools.tune_end_penalty --run-dir runs/student_inter \\
    --data-dir ../shared/data/gigaword_sample --output student_inter_search.json
python -m models.export --run-dir runs/student_inter \\
    --export-dir saved_models/student_inter --search-options student_inter_search.json
python -m models.evaluation --model-dir saved_models/student_inter/2 \\
    --data-dir ../shared/data/gigaword_sample
```
"""

import argparse
import dataclasses
import json
import sys

from models.data import load_split
from models.decoding.tuning import format_greedy_rows, tune_greedy_end_penalty
from models.model.run_folder import load_run, load_trained_model
from models.settings.search import SearchOptions


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--examples", type=int, default=500, help="as train.py's")
    parser.add_argument(
        "--penalties",
        type=float,
        nargs="+",
        default=[0.0, 0.5, 1.0, 1.5, 2.0, 3.0],
        help="as train.py's --tune-end-penalties",
    )
    parser.add_argument("--members", type=int, default=None, help="as export's")
    parser.add_argument("--output", required=True, help="the chosen settings (JSON)")
    args = parser.parse_args(argv)

    _, features = load_run(args.run_dir)
    model = load_trained_model(args.run_dir, members=args.members)
    validation = load_split("validation", data_dir=args.data_dir)
    pairs = list(validation.take(args.examples).as_numpy_iterator())
    chosen, rows = tune_greedy_end_penalty(
        model,
        features,
        [d for d, _ in pairs],
        [s.decode("utf-8") for _, s in pairs],
        SearchOptions.tuned(args.run_dir),
        args.penalties,
    )
    print(format_greedy_rows(rows, chosen), file=sys.stderr)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(dataclasses.asdict(chosen), f, indent=2)
        f.write("\n")
    print(json.dumps({"chosen": dataclasses.asdict(chosen), "grid": rows}))


if __name__ == "__main__":
    main()
