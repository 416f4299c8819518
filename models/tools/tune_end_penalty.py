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

import dataclasses
import json
import sys

from models.settings.data import DataSource
from models.settings.flags import SettingsParser
from models.settings.json_files import write_json
from models.settings.search import SearchOptions
from models.settings.train import TuningSettings


def argument_parser():
    """The command line; the defaults are `train.py`'s (`TuningSettings`)."""
    tuning = TuningSettings()
    parser = SettingsParser(
        prog="python -m models.tools.tune_end_penalty",
        description=__doc__.split("\n")[0],
    )
    parser.add_argument("--run-dir", required=True)
    parser.add_argument(
        "--data-dir",
        default=None,
        help="the validation split's folder (default: the run's own, as "
        "recorded in its data_source.json)",
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=tuning.tune_examples,
        help="as train.py's --tune-examples",
    )
    parser.add_argument(
        "--penalties",
        type=float,
        nargs="+",
        default=tuning.tune_end_penalties,
        help="as train.py's --tune-end-penalties",
    )
    parser.add_argument("--members", type=int, default=None, help="as export's")
    parser.add_argument("--output", required=True, help="the chosen settings (JSON)")
    return parser


def main(argv=None):
    args = argument_parser().parse_args(argv)
    from models.data import load_split
    from models.decoding.tuning import format_greedy_rows, tune_greedy_end_penalty
    from models.model.run_folder import load_run, load_trained_model

    _, features = load_run(args.run_dir)
    model = load_trained_model(args.run_dir, members=args.members)
    source = DataSource.recorded(args.run_dir)
    if args.data_dir is not None:
        source = dataclasses.replace(source, data_dir=args.data_dir)
    validation = load_split("validation", source)
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
    write_json(args.output, dataclasses.asdict(chosen))
    print(json.dumps({"chosen": dataclasses.asdict(chosen), "grid": rows}))


if __name__ == "__main__":
    main()
