"""What one shape per width saves a Pointer Network's first epochs.

`examples.pointer_networks.Batches` pads each batch to a multiple of
`pad_to`, and each new batch shape compiles a training step of its own (on
JAX, and in TensorFlow's `tf.function`). Three batchings of the same
examples:

* `size`: batches of one size each (the batching before 2026-11-26), so
  every size ends in a short batch of its own;
* `width`: the sizes of one padded width share batches; each width ends in
  a short batch;
* `filled`: as `width`, with `fill_last`: a width is one shape.

This script trains the paper runner's hull model over n = 5-50 for two
epochs of fresh examples, in a fresh process per batching, and prints the
distinct shapes and each epoch's wall and CPU seconds, steps and mean loss:

```
KERAS_BACKEND=jax python -m benchmarks.pointer_batch_shapes --units 64 \\
    --chunk 4096
```
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

from benchmarks.paper_runs import machine

BATCHINGS = ("size", "width", "filled")


def _batches(ptrnet, chunk, batching, seed):
    """A list of `(x, y)` in a shuffled order."""
    if batching == "size":
        per_size = [ptrnet.Batches([g], 128, 5, seed) for g in chunk]
        steps = [b[i] for b in per_size for i in range(len(b))]
    else:
        batches = ptrnet.Batches(chunk, 128, 5, seed, fill_last=batching == "filled")
        steps = [batches[i] for i in range(len(batches))]
    order = np.random.default_rng(seed).permutation(len(steps))
    return [steps[i] for i in order]


def one_setting(batching, args):
    """Two epochs in this process; returns the figures as a dict."""
    import keras

    from examples import planar_problems
    from examples import pointer_networks as ptrnet

    sizes = ptrnet.parse_sizes(args.sizes)
    keras.utils.set_random_seed(0)
    model, _ = ptrnet.build_model(args.units, False, "adam", 1e-3)
    shapes, epochs = set(), []
    for epoch in range(2):
        chunk = planar_problems.make_split("hull", sizes, args.chunk, seed=epoch)
        steps = _batches(ptrnet, chunk, batching, epoch)
        cpu, wall = time.process_time(), time.perf_counter()
        losses = []
        for x, y in steps:
            shapes.add(x[0].shape[:2])
            losses.append(float(np.asarray(model.train_on_batch(x, y))))
        epochs.append(
            {
                "wall_s": round(time.perf_counter() - wall, 1),
                "cpu_s": round(time.process_time() - cpu, 1),
                "steps": len(steps),
                "loss": round(float(np.mean(losses)), 4),
            }
        )
    return {"batching": batching, "shapes": len(shapes), "epochs": epochs}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="5-50")
    parser.add_argument("--units", type=int, default=64)
    parser.add_argument("--chunk", type=int, default=4096, help="examples an epoch")
    parser.add_argument("--only", choices=BATCHINGS, default=None)
    args = parser.parse_args(argv)
    if args.only:  # the child process: one setting, one JSON line
        print(json.dumps(one_setting(args.only, args)))
        return
    import keras

    print(f"machine: {machine()}, backend {keras.backend.backend()}")
    base = [sys.executable, "-m", "benchmarks.pointer_batch_shapes"]
    for only in BATCHINGS:
        out = subprocess.run(
            [*base, *(argv or sys.argv[1:]), "--only", only],
            capture_output=True,
            text=True,
            check=True,
        )
        print(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
