"""Time of one EntNet training step on a bAbI task, on this process's backend.

Run once per backend (the backend is fixed at import) and compare. It
reports CPU seconds per step (this process, all threads: on a shared machine
that hardly depends on the other jobs) and wall seconds per step, after
`--warmup` steps that compile, on the length-bucketed batches of
`examples/entity_networks.py` (batch 32, the paper's 100-d, 20 slots).

```
for b in tensorflow jax torch; do
  KERAS_BACKEND=$b python -m benchmarks.bench_entnet_step --task 2
done
```
"""

import argparse
import json
import time

import keras

from examples import entity_networks


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="steps before timing (default: one per batch length)",
    )
    parser.add_argument("--data-dir", default=entity_networks.DEFAULT_DATA_DIR)
    args = parser.parse_args(argv)
    data = entity_networks.load_task(args.data_dir, args.task)
    model, _ = entity_networks.build_model(len(data["vocab"]), data["max_words"])
    model.compile(
        optimizer=keras.optimizers.Adam(0.01, clipnorm=40.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    batches = entity_networks.LengthBuckets(data["train"], 32, seed=0)
    if args.warmup is None:  # every length compiles before the clock starts
        args.warmup = len(batches.bounds)
    # The same batches for every backend: the first of each length (all
    # lengths compile during the warmup), then the shuffled rest.
    order = [batches[i] for i in range(args.warmup + args.steps)]
    wall, cpu = time.monotonic(), time.process_time()
    for i, (inputs, answers) in enumerate(order):
        if i == args.warmup:
            wall, cpu = time.monotonic(), time.process_time()
        model.train_on_batch(list(inputs), answers)
    result = {
        "backend": keras.backend.backend(),
        "task": args.task,
        "steps": args.steps,
        "cpu_s_per_step": (time.process_time() - cpu) / args.steps,
        "wall_s_per_step": (time.monotonic() - wall) / args.steps,
        "mean_sentences": float(
            sum(b[0][0].shape[1] for b in order[args.warmup :]) / args.steps
        ),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
