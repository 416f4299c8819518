"""Minimum-risk fine-tuning's pilot: does it raise validation ROUGE-1, and
at what cost per training example against likelihood training?

One trained member of a run (its `model.keras`) is fine-tuned by
`models.risk_fine_tuning` on the first `--examples` training pairs for
`--epochs` epochs, with `--candidates` candidates (the reference and
sampled headlines); validation ROUGE-1 of greedy headlines (the run's
validation sample) is measured before and after each epoch. In the same
process, on the same pairs, one epoch of likelihood training from the same
weights gives likelihood's training examples/s.

```
python -m benchmarks.risk_pilot --data-dir ../shared/data/gigaword_sample \
    --run-dir runs/headlines --examples 3000 --candidates 4 --epochs 1 \
    --json-out benchmarks/results/risk_pilot.json
```
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def _parser():
    p = argparse.ArgumentParser(prog="python -m benchmarks.risk_pilot")
    p.add_argument("--data-dir", required=True, help="the data's org_data folder")
    p.add_argument("--run-dir", required=True, help="a trained run (runs/<name>)")
    p.add_argument("--examples", type=int, default=3000, help="training pairs")
    p.add_argument("--candidates", type=int, default=4, help="reference + sampled")
    p.add_argument("--epochs", type=int, default=1, help="fine-tuning epochs")
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--alpha", type=float, default=1.0, help="sharpness")
    p.add_argument("--nll-weight", type=float, default=0.3)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--validation-examples", type=int, default=1000)
    p.add_argument("--json-out", help="append the result to this JSON file")
    p.add_argument(
        "--save-model",
        help="write the model after the last epoch (whatever validation says) "
        "to this .keras file, to be exported and scored as its own row",
    )
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    import keras

    from benchmarks.common import machine_info
    from models import data
    from models.config import RiskOptions, TrainOptions
    from models.folder_layout import LATEST_WEIGHTS_FILE, MODEL_FILE, RISK_DIR
    from models.risk_fine_tuning import fine_tune
    from models.run_folder import load_run
    from models.training import build_model

    config, features = load_run(args.run_dir)
    trained = keras.saving.load_model(Path(args.run_dir) / MODEL_FILE, compile=False)
    splits = {
        s: data.load_split(s, data_dir=args.data_dir) for s in ("train", "validation")
    }
    train = data.encode_dataset(splits["train"].take(args.examples), features)
    batches = data.batched(
        train, 64, training=True, max_source_length=config.max_source_length, seed=0
    )
    steps = int(batches.reduce(0, lambda count, _: count + 1))
    pairs = list(splits["validation"].take(args.validation_examples))
    validation = (
        [d.numpy() for d, _ in pairs],
        [s.numpy().decode("utf-8") for _, s in pairs],
    )

    likelihood = build_model(config, TrainOptions())
    likelihood.set_weights(trained.get_weights())
    start = time.monotonic()
    likelihood.fit(batches, epochs=1, verbose=0)
    likelihood_rate = args.examples / (time.monotonic() - start)

    options = RiskOptions(
        risk_epochs=args.epochs,
        risk_candidates=args.candidates,
        risk_patience=args.epochs + 1,
        risk_learning_rate=args.learning_rate,
        risk_alpha=args.alpha,
        risk_nll_weight=args.nll_weight,
        risk_temperature=args.temperature,
    )
    folder = Path(tempfile.mkdtemp(prefix="risk-pilot-"))
    try:
        record = fine_tune(
            trained, batches, steps, validation, features, options, folder
        )
        if args.save_model:
            trained.load_weights(folder / RISK_DIR / LATEST_WEIGHTS_FILE)
            trained.save(args.save_model)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result = {
        "run_dir": str(args.run_dir),
        "examples": args.examples,
        "candidates": args.candidates,
        "options": {
            k: getattr(options, k)
            for k in ("risk_learning_rate", "risk_alpha", "risk_nll_weight")
        },
        "validation_rouge1": record["rouge1"],
        "risk_examples_per_second": record["examples_per_second"],
        "likelihood_examples_per_second": round(likelihood_rate, 1),
        "machine": machine_info(),
    }
    print(json.dumps(result, indent=2))
    if args.json_out:
        path = Path(args.json_out)
        results = json.loads(path.read_text()) if path.exists() else []
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([*results, result], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
