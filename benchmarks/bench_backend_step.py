"""The summarizer's recipe model on each Keras backend: a training step and a
greedy search (BENCHMARKS.md, "The summarizer's step and search on each
backend"), which decided that `train.py --backend torch` is refused.

Each backend runs in its own process (Keras picks its backend at import;
the JAX one may live in a venv without TensorFlow), the backends in turn
for `--rounds` rounds, so that each round sees the same load:

    python -m benchmarks.bench_backend_step --jax-python /work/jaxvenv/bin/python

A worker (`--worker`, on the backend of `KERAS_BACKEND`) builds the model as
`train.py` does on that backend (XLA on JAX, as `--backend jax` always
compiles; not on TensorFlow, the plain command's default; eager on torch),
warms up, times `--steps` steps of `train_on_batch` and one greedy search,
and prints one JSON line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

BATCH, SOURCE, TARGET, VOCAB = 64, 48, 16, 10_000
BACKENDS = ("tensorflow", "jax", "torch")


def _search(model, ids):
    """The greedy search of `ids`, compiled as `train.py`'s validation runs
    it: a `tf.function` on TensorFlow, `jax.jit` on JAX, eager on torch."""
    import keras

    from models.decoding.id_search import decode_ids
    from models.settings.search import SearchOptions

    def search(ids):
        result = decode_ids(
            model,
            ids,
            ids,
            SearchOptions(),
            beam_size=1,
            length_penalty=1.0,
            min_length=0,
        )
        return result.ids

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        traced = tf.function(search)
        return lambda: traced(ids).numpy()
    if keras.backend.backend() != "jax":
        return lambda: search(ids)
    import jax

    variables = list(model.variables)

    @jax.jit
    def stateless(values, ids):
        mapping = list(zip(variables, values, strict=True))
        with keras.StatelessScope(state_mapping=mapping):
            return search(ids)

    return lambda: stateless([v.value for v in variables], ids).block_until_ready()


def worker(steps):
    """Times one backend: `{"backend", "step_s": [...], "search_s"}`."""
    import keras

    from models.settings.fit import TrainOptions
    from models.settings.model import SummarizerConfig
    from models.training.fit import build_model

    backend = keras.backend.backend()
    config = SummarizerConfig(
        max_source_length=64, max_target_length=TARGET, normalization="gigaword"
    )
    model = build_model(config, TrainOptions(jit_compile=backend == "jax"))
    rng = np.random.default_rng(0)
    source = rng.integers(4, VOCAB, (BATCH, SOURCE)).astype("int32")
    inputs = {
        "source_ids": source,
        "source_ext_ids": source,
        "target_in": rng.integers(4, VOCAB, (BATCH, TARGET)).astype("int32"),
    }
    targets = rng.integers(4, VOCAB, (BATCH, TARGET)).astype("int32")
    model.train_on_batch(inputs, targets)  # traces (and compiles on JAX)
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        model.train_on_batch(inputs, targets)
        seconds.append(time.perf_counter() - start)
    search = _search(model, source)
    search()
    start = time.perf_counter()
    search()
    search_s = time.perf_counter() - start
    return {"backend": backend, "step_s": seconds, "search_s": search_s}


def run_worker(backend, python, steps):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    command = [python, "-m", "benchmarks.bench_backend_step", "--worker"]
    command += ["--steps", str(steps)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{backend} worker failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=BACKENDS)
    parser.add_argument("--jax-python", default=sys.executable, help="JAX's Python")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="timed steps a round")
    parser.add_argument("--output", help="write the figures here (JSON)")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.steps)))
        return
    results = {b: {"step_s": [], "search_s": []} for b in args.backends}
    for round_ in range(args.rounds):
        for backend in args.backends:
            python = args.jax_python if backend == "jax" else sys.executable
            figures = run_worker(backend, python, args.steps)
            results[backend]["step_s"] += figures["step_s"]
            results[backend]["search_s"].append(figures["search_s"])
            step = statistics.median(figures["step_s"])
            print(
                f"round {round_ + 1}, {backend}: step {step:.3f} s "
                f"({BATCH / step:.0f} examples/s), search {figures['search_s']:.3f} s",
                flush=True,
            )
    summary = {}
    for backend, figures in results.items():
        step = statistics.median(figures["step_s"])
        summary[backend] = {
            "median_step_s": step,
            "examples_per_s": BATCH / step,
            "median_search_s": statistics.median(figures["search_s"]),
            **figures,
        }
        print(
            f"{backend}: {BATCH / step:.0f} examples/s (median step {step:.3f} s), "
            f"greedy search of {BATCH}: {summary[backend]['median_search_s']:.3f} s"
        )
    if args.output:
        with open(args.output, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
