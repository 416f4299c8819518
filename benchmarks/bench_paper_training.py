"""Training FLOPs and throughput of the papers' examples, old batching vs new.

For one training step of each example (EntNet on a bAbI task, a Ptr-Net on
convex hulls and on TSP) it counts the FLOPs of the matrix products (one
multiply-add = 2 FLOPs; backpropagation doubles each product, so a step is 3x
the forward pass; element-wise work is left out, as in `benchmarks/flops.py`),
and measures examples per CPU second and per wall second of two batchings of
the SAME examples, interleaved `--repeats` times in one process:

* EntNet: `old` cuts batches to the bucket lengths `T/4, T/2, T`; `new` to
  every multiple of 5 sentences (`LengthBuckets(bucket_width=5)`).
* Ptr-Net: `old` pads sizes to a multiple of 10; `new` to a multiple of 5.

XLA on TensorFlow (`jit_compile=True`) is not among them: it fails to
compile the RNN loop's gradient once the story length is a dynamic axis.

Both see the same examples, so the ratio of their examples/s is the speed-up,
and the FLOPs/s of each beside the fp32 matmul peak measured in the same run
(`--peak-size` cubed) say how much of the machine the step gets.

```
nice -n 10 python -m benchmarks.bench_paper_training --task 2 --repeats 3
KERAS_BACKEND=jax python -m benchmarks.bench_paper_training
```
"""

from __future__ import annotations

import argparse
import json
import time

import keras
import numpy as np
from keras import ops

from papers import entity_networks as entnet
from papers import planar_problems
from papers import pointer_networks as ptrnet
from papers.records import machine


def matmul_peak(size, repeats=5):
    """fp32 GFLOP/s of a `size`-cubed matmul: `(per CPU second, per wall second)`."""
    a = ops.convert_to_tensor(
        np.random.default_rng(0).normal(size=(size, size)), "float32"
    )
    ops.convert_to_numpy(ops.matmul(a, a))
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(repeats):
        ops.convert_to_numpy(ops.matmul(a, a))
    flops = 2 * size**3 * repeats / 1e9
    return flops / (time.process_time() - cpu), flops / (time.perf_counter() - wall)


def entnet_step_flops(batch, steps, dim, slots, vocab):
    """FLOPs of one EntNet training step: `batch` stories of `steps` sentences.

    Per sentence and story: `U h_j` over the slots (2 N d^2), `W s` (2 d^2),
    the gates' content and location terms (2 * 2 N d); per sentence once for
    the batch, `V w_j` (2 N d^2). Per story, the output: the read attention
    and its sum (2 * 2 N d), `H u` (2 d^2) and `R` (2 d V).
    """
    n, d = slots, dim
    per_sentence = 2 * n * d * d + 2 * d * d + 4 * n * d
    forward = batch * steps * per_sentence + steps * 2 * n * d * d
    forward += batch * (4 * n * d + 2 * d * d + 2 * d * vocab)
    return 3 * forward


def pointer_step_flops(batch, width, units, input_dim=2):
    """FLOPs of one Ptr-Net training step on `batch` inputs padded to `width`.

    LSTM cells (2 * 4u(in + u) a step) over `width` encoder and `width + 1`
    teacher-forced decoder steps; the additive score's key projection
    (2u^2 per memory position, END included), query projection (2u^2 a
    step) and `v . tanh` (2u per position a step); the decoder's input as a
    one-hot product with the `(width + 1, in)` table.
    """
    cell = 2 * 4 * units * (input_dim + units)
    positions = width + 1
    forward = width * cell + positions * 2 * units * units
    forward += positions * (cell + 2 * units * units + positions * 2 * units)
    forward += positions * positions * 2 * input_dim
    return 3 * batch * forward


def _entnet_case(task, examples, data_dir):
    data = entnet.load_task(data_dir, task)
    vocab = len(data["vocab"])
    split = tuple(x[:examples] for x in data["train"])
    cases = {}
    for name, width in (("old", None), ("new", 5)):
        keras.utils.set_random_seed(0)
        model, _ = entnet.build_model(vocab, data["max_words"])
        model.compile(
            optimizer=keras.optimizers.Adam(0.01, clipnorm=40.0),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        buckets = entnet.LengthBuckets(split, 32, seed=0, bucket_width=width)
        batches = [buckets[i] for i in range(len(buckets))]
        flops = sum(
            entnet_step_flops(len(y), s.shape[1], 100, 20, vocab)
            for (s, _), y in batches
        )
        cases[name] = (model, [(list(x), y) for x, y in batches], flops)
    return cases


def _pointer_case(task, sizes, examples, units):
    groups = planar_problems.make_split(task, sizes, examples, seed=1)
    keras.utils.set_random_seed(0)
    model, _ = ptrnet.build_model(units, task == "tsp")
    cases = {}
    for name, pad_to in (("old", 10), ("new", 5)):
        batches = ptrnet.Batches(groups, 128, pad_to, seed=0)
        steps = [batches[i] for i in range(len(batches))]
        flops = sum(pointer_step_flops(len(y), x[0].shape[1], units) for x, y in steps)
        cases[name] = (model, steps, flops)
    return cases


def measure(cases, repeats):
    """Interleaved `old, new, old, new, ...` passes over the same examples."""
    for model, steps, _ in cases.values():  # compile every shape first
        for x, y in steps:
            model.train_on_batch(x, y)
    totals = {name: [0.0, 0.0, 0] for name in cases}
    for _ in range(repeats):
        for name, (model, steps, _) in cases.items():
            cpu, wall = time.process_time(), time.perf_counter()
            for x, y in steps:
                model.train_on_batch(x, y)
            total = totals[name]
            total[0] += time.process_time() - cpu
            total[1] += time.perf_counter() - wall
            total[2] += sum(len(y) for _, y in steps)
    out = {}
    for name, (cpu, wall, count) in totals.items():
        flops = cases[name][2] * repeats
        out[name] = {
            "examples_per_cpu_s": count / cpu,
            "examples_per_wall_s": count / wall,
            "gflop_per_example": cases[name][2] / (count / repeats) / 1e9,
            "gflops_per_cpu_s": flops / cpu / 1e9,
        }
    for name in [n for n in cases if n != "old"]:
        for clock in ("cpu", "wall"):
            key = f"examples_per_{clock}_s"
            out[name][f"speedup_{clock}"] = out[name][key] / out["old"][key]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", type=int, default=2, help="bAbI task")
    parser.add_argument("--examples", type=int, default=2048)
    parser.add_argument("--units", type=int, default=256, help="Ptr-Net LSTM")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peak-size", type=int, default=1024)
    parser.add_argument("--only", choices=["entnet", "hull", "tsp"], default=None)
    parser.add_argument("--data-dir", default=entnet.DEFAULT_DATA_DIR)
    args = parser.parse_args(argv)
    peak_cpu, peak_wall = matmul_peak(args.peak_size)
    result = {
        "backend": keras.backend.backend(),
        "machine": machine(),
        "matmul_peak_gflops": {"per_cpu_s": peak_cpu, "per_wall_s": peak_wall},
    }
    cases = {
        "entnet": lambda: _entnet_case(args.task, args.examples, args.data_dir),
        "hull": lambda: _pointer_case("hull", range(5, 51), args.examples, args.units),
        "tsp": lambda: _pointer_case("tsp", range(5, 21), args.examples, args.units),
    }
    for name, build in cases.items():
        if args.only not in (None, name):
            continue
        result[name] = measure(build(), args.repeats)
        print(json.dumps({name: result[name]}), flush=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
