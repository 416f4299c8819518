"""Time of one EntNet training step on a bAbI task, on this process's backend.

Run once per backend (the backend is fixed at import) and compare. It
reports CPU seconds per step (this process, all threads: on a shared machine
that hardly depends on the other jobs) and wall seconds per step, after one
step of every batch shape (each compiles), on the length-bucketed batches of
`papers/entity_networks.py` (batch 32, the paper's 100-d, 20 slots).

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

from papers import entity_networks


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", type=int, default=2)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--data-dir", default=entity_networks.DEFAULT_DATA_DIR)
    args = parser.parse_args(argv)
    data = entity_networks.load_task(args.data_dir, args.task)
    model, _ = entity_networks.build_model(len(data["vocab"]), data["max_words"])
    model.compile(
        optimizer=keras.optimizers.Adam(0.01, clipnorm=40.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    batches = entity_networks.LengthBuckets(data["train"], 32, seed=0)
    order = [batches[i] for i in range(len(batches))]
    # Every batch shape compiles before the clock starts: each length's
    # full batch and its last, smaller one. On JAX a compilation inside the
    # timed steps would cost more than the steps.
    warmup = list({_shape(b): b for b in reversed(order)}.values())
    timed = order[: args.steps]
    for inputs, answers in warmup:
        model.train_on_batch(list(inputs), answers)
    wall, cpu = time.monotonic(), time.process_time()
    for inputs, answers in timed:
        model.train_on_batch(list(inputs), answers)
    result = {
        "backend": keras.backend.backend(),
        "task": args.task,
        "steps": len(timed),
        "shapes_compiled": len(warmup),
        "cpu_s_per_step": (time.process_time() - cpu) / len(timed),
        "wall_s_per_step": (time.monotonic() - wall) / len(timed),
        "mean_sentences": float(sum(b[0][0].shape[1] for b in timed) / len(timed)),
    }
    print(json.dumps(result))


def _shape(batch):
    inputs, answers = batch
    return tuple(x.shape for x in inputs), answers.shape


if __name__ == "__main__":
    main()
