"""Minimum-risk fine-tuning's pilot: does it raise validation ROUGE-1, and
at what cost per training example against likelihood training?

One trained member of a run (its `model.keras`) is fine-tuned by
`models.training.risk_fine_tuning` with the stage's defaults, Edunov et al. 2018's
recipe (`models.settings.risk.RiskOptions`): the beam's 8 best headlines without
the reference, costs `100 * (1 - ROUGE)`, the candidates' distribution from
their length-normalized log-probabilities, the loss `0.5 * risk + 0.5 *
likelihood`, Adam's rate warmed up over the first tenth of the updates;
`--updates` batches of `--batch-size` (64) over all the training pairs (or the first
`--examples`), pass after pass. Validation ROUGE-1 of greedy headlines (the
first `--validation-examples` validation pairs) is measured before the first
update and every `--validate-every` updates. In the same process, on the
same batches, likelihood training from the same weights gives likelihood's
training examples/s (`--likelihood-batches`, after a few untimed ones).

```
python -m benchmarks.risk_pilot --data-dir ../shared/data/gigaword_sample \
    --run-dir runs/headlines --stage-dir runs/headlines-risk-pilot \
    --json-out benchmarks/results/risk_pilot.json
```

With `--stage-dir` the stage keeps its state there, so the same command
resumes a cut pilot; without it, a temporary folder holds it.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from models.settings.json_files import read_json, write_json

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

UNTIMED_BATCHES = 5


def _parser():
    p = argparse.ArgumentParser(prog="python -m benchmarks.risk_pilot")
    p.add_argument("--data-dir", required=True, help="the data's org_data folder")
    p.add_argument("--run-dir", required=True, help="a trained run (runs/<name>)")
    p.add_argument("--examples", type=int, help="training pairs (default: all)")
    p.add_argument("--updates", type=int, default=2000, help="fine-tuning updates")
    p.add_argument("--batch-size", type=int, default=64, help="examples an update")
    p.add_argument("--validate-every", type=int, default=500, help="updates")
    p.add_argument("--patience", type=int, default=3, help="validations")
    p.add_argument("--candidates", type=int, default=8, help="the beam's n best")
    p.add_argument("--method", choices=("beam", "sample"), default="beam")
    p.add_argument(
        "--include-reference",
        action="store_true",
        help="the reference is a candidate too",
    )
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--warmup-updates", type=int, help="default: a tenth of updates")
    p.add_argument("--alpha", type=float, default=1.0, help="sharpness")
    p.add_argument("--nll-weight", type=float, default=0.5)
    p.add_argument("--temperature", type=float, default=1.0, help="sampling only")
    p.add_argument("--validation-examples", type=int, default=1000)
    p.add_argument(
        "--likelihood-batches",
        type=int,
        default=100,
        help="batches timed for likelihood's examples/s",
    )
    p.add_argument("--stage-dir", help="where the stage keeps its state (resumable)")
    p.add_argument("--json-out", help="append the result to this JSON file")
    p.add_argument(
        "--save-model",
        help="write the model at the last validation (whatever validation "
        "says) to this .keras file, to be exported and scored as its own row",
    )
    return p


def _options(args):
    from models.settings.risk import RiskOptions

    return RiskOptions(
        risk_updates=args.updates,
        risk_validate_every=args.validate_every,
        risk_patience=args.patience,
        risk_candidates=args.candidates,
        risk_method=args.method,
        risk_include_reference=args.include_reference,
        risk_temperature=args.temperature,
        risk_alpha=args.alpha,
        risk_nll_weight=args.nll_weight,
        risk_learning_rate=args.learning_rate,
        risk_warmup_updates=args.warmup_updates,
    )


def _likelihood_rate(config, trained, examples, batches, batch_size):
    """Likelihood training's examples/s from `trained`'s weights on the first
    `batches` batches of `batch_size` of the stream (after `UNTIMED_BATCHES`
    untimed)."""
    import tensorflow as tf

    from models import data
    from models.settings.fit import TrainOptions
    from models.training.fit import build_model

    likelihood = build_model(config, TrainOptions())
    likelihood.set_weights(trained.get_weights())
    stream = data.stream_batches(
        examples, batch_size, seed=0, max_source_length=config.max_source_length
    )
    likelihood.fit(stream.take(UNTIMED_BATCHES), epochs=1, verbose=0)
    timed = stream.skip(UNTIMED_BATCHES).take(batches)
    read = int(timed.reduce(0, lambda count, batch: count + tf.shape(batch[1])[0]))
    start = time.monotonic()
    likelihood.fit(timed, epochs=1, verbose=0)
    return read / (time.monotonic() - start)


def main(argv=None):
    args = _parser().parse_args(argv)
    import keras

    from benchmarks.common import machine_info
    from models import data
    from models.model.run_folder import load_run
    from models.settings.data import DataSource
    from models.settings.folder_layout import LATEST_WEIGHTS_FILE, MODEL_FILE, RISK_DIR
    from models.training.risk_fine_tuning import fine_tune

    options = _options(args)
    config, features = load_run(args.run_dir)
    trained = keras.saving.load_model(Path(args.run_dir) / MODEL_FILE, compile=False)
    splits = {
        s: data.load_split(s, DataSource(data_dir=args.data_dir))
        for s in ("train", "validation")
    }
    train = splits["train"]
    if args.examples:
        train = train.take(args.examples)
    examples = data.cached_examples(
        data.encode_dataset(train, features), Path(args.run_dir)
    )
    pairs = list(splits["validation"].take(args.validation_examples))
    validation = (
        [d.numpy() for d, _ in pairs],
        [s.numpy().decode("utf-8") for _, s in pairs],
    )
    likelihood_rate = _likelihood_rate(
        config, trained, examples, args.likelihood_batches, args.batch_size
    )

    folder = Path(args.stage_dir or tempfile.mkdtemp(prefix="risk-pilot-"))
    try:
        record = fine_tune(
            trained,
            examples,
            validation,
            features,
            options,
            folder,
            batch_size=args.batch_size,
        )
        if args.save_model:
            trained.load_weights(folder / RISK_DIR / LATEST_WEIGHTS_FILE)
            trained.save(args.save_model)
    finally:
        if not args.stage_dir:
            shutil.rmtree(folder, ignore_errors=True)
    result = {
        "run_dir": str(args.run_dir),
        "examples": args.examples or "all",
        "batch_size": args.batch_size,
        "options": {k: v for k, v in vars(options).items() if k != "risk_examples"},
        "updates": record["updates"],
        "best_updates": record["best_updates"],
        "validation_rouge1": record["rouge1"],
        "risk_examples_per_second": record["examples_per_second"],
        "likelihood_examples_per_second": round(likelihood_rate, 1),
        "machine": machine_info(),
    }
    print(json.dumps(result, indent=2))
    if args.json_out:
        results = read_json(args.json_out, default=[])
        write_json(args.json_out, [*results, result])
    return 0


if __name__ == "__main__":
    sys.exit(main())
