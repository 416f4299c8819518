"""Greedy and beam search time on this process's backend, eager and compiled.

One small attention decoder (a GRU step with `BahdanauAttention` over a
memory of 12 positions, 64 units, a vocabulary of 500 and untrained weights
that never choose the end token, so every row runs `--max-length` steps)
decodes `--sources` rows at once. Per backend:

* `eager`: `greedy_search` / `beam_search` called as they are (on torch,
  under the `torch.no_grad()` the searches open themselves);
* `torch, gradients recorded`: the same searches without it (the function
  the decorator wraps, `__wrapped__`), as they ran before;
* `jax.jit`: a function that closes over the step, with `max_length` and
  `beam_size` static (docs/search.md, "Decoding on JAX and torch"); its
  first call compiles;
* `tf.function`: the same function traced once.

The first call and the median of `--repeats` later calls are reported, in
seconds, and the later call per step (`step_ms`). Run once per backend (the
backend is fixed at import):

```
for b in tensorflow jax torch; do
  KERAS_BACKEND=$b python -m benchmarks.bench_search_backends
done
```

With `--extras W` the step also returns extras of shape `(N, W)` (a
projection of its hidden state), which the search records at every step;
several `--max-length`s, each timed on its own, show whether a step's cost
grows with the length of the buffers. The compiled beam search also runs
traced inside `keras_attn.search.writes_by_select` (`..., writes by
select`): each step's buffers written by a select over all of them, as
before it wrote one row. `--runs` keeps the named runs:

```
KERAS_BACKEND=tensorflow python -m benchmarks.bench_search_backends \
    --sources 32 --beam-size 4 --extras 400 --max-length 50 100 200 400 \
    --runs "beam tf.function" "beam tf.function, writes by select" --repeats 3
```
"""

import argparse
import functools
import json
import time

import keras
import numpy as np
from keras import ops

import keras_attn as ka
from benchmarks.common import interleaved, median, print_machine_info

START, END = 1, 2


def build_step(units, vocab, source_length, sources, seed=0, extras=0):
    """`(step, memory)`: a one-token step over a prepared memory, returning
    extras `(N, extras)` when `extras` > 0."""
    rng = np.random.default_rng(seed)
    encoded = rng.normal(size=(sources, source_length, units)).astype("float32")
    embedding = keras.layers.Embedding(vocab, units)
    cell = keras.layers.GRUCell(units)
    attention = ka.BahdanauAttention(units)
    output = keras.layers.Dense(vocab)
    attention.build([(None, units), (None, None, units)])
    cell.build((None, 2 * units))
    output.build((None, units))
    embedding.build((None,))
    # The end token is never chosen: every row runs the whole length.
    bias = np.zeros(vocab, "float32")
    bias[END] = -1e9
    output.bias.assign(bias)
    projection = ops.convert_to_tensor(
        rng.normal(size=(units, max(extras, 1))).astype("float32")
    )

    def step(ids, state):
        hidden, memory = state
        context, _ = attention.step(hidden, memory)
        joined = ops.concatenate([embedding(ids), context], -1)
        hidden, _ = cell(joined, [hidden])
        log_probs = ops.log_softmax(output(hidden), -1)
        if extras:
            return log_probs, (hidden, memory), ops.matmul(hidden, projection)
        return log_probs, (hidden, memory)

    memory = attention.prepare_memory(ops.convert_to_tensor(encoded))
    state = (ops.zeros((sources, units)), memory)
    return step, state


def searches(step, state, start_ids, max_length, beam_size):
    """`{name: zero-argument callable}` of the searches to time."""
    greedy = functools.partial(ka.greedy_search, check_log_probs=False)
    beam = functools.partial(ka.beam_search, check_log_probs=False)
    runs = {
        "greedy eager": lambda: greedy(step, state, start_ids, END, max_length),
        "beam eager": lambda: beam(step, state, start_ids, END, max_length, beam_size),
    }
    backend = keras.backend.backend()
    if backend == "torch":
        recorded = ka.greedy_search.__wrapped__.__wrapped__
        runs["greedy eager, gradients recorded"] = lambda: recorded(
            step, state, start_ids, END, max_length, check_log_probs=False
        )
        recorded_beam = ka.beam_search.__wrapped__.__wrapped__
        runs["beam eager, gradients recorded"] = lambda: recorded_beam(
            step, state, start_ids, END, max_length, beam_size, check_log_probs=False
        )
    elif backend == "jax":
        import jax

        def decode(state, start_ids, max_length, beam_size):
            if beam_size == 1:
                return greedy(step, state, start_ids, END, max_length)
            return beam(step, state, start_ids, END, max_length, beam_size)

        jitted = jax.jit(decode, static_argnames=("max_length", "beam_size"))
        runs["greedy jax.jit"] = lambda: jitted(state, start_ids, max_length, 1)
        runs["beam jax.jit"] = lambda: jitted(state, start_ids, max_length, beam_size)
    elif backend == "tensorflow":
        import tensorflow as tf

        traced_greedy = tf.function(
            lambda state, ids: greedy(step, state, ids, END, max_length)
        )
        traced_beam = tf.function(
            lambda state, ids: beam(step, state, ids, END, max_length, beam_size)
        )
        runs["greedy tf.function"] = lambda: traced_greedy(state, start_ids)
        runs["beam tf.function"] = lambda: traced_beam(state, start_ids)
    return runs


def by_select_runs(step, state, start_ids, max_length, beam_size):
    """The compiled beam search traced inside `writes_by_select`: its buffers
    written by a select over every step, as before they were written by row."""
    beam = functools.partial(ka.beam_search, check_log_probs=False)

    def decode(state, start_ids):
        with ka.search.writes_by_select():
            return beam(step, state, start_ids, END, max_length, beam_size)

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        jitted = jax.jit(decode)
        return {"beam jax.jit, writes by select": lambda: jitted(state, start_ids)}
    if backend == "tensorflow":
        import tensorflow as tf

        traced = tf.function(decode)
        return {"beam tf.function, writes by select": lambda: traced(state, start_ids)}
    return {}


def first_call(run):
    """Seconds of one call, to its ids on the host: tracing and compiling."""
    start = time.perf_counter()
    ops.convert_to_numpy(run().ids)
    return time.perf_counter() - start


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sources", type=int, default=500)
    p.add_argument("--max-length", type=int, nargs="+", default=[20])
    p.add_argument("--beam-size", type=int, default=3)
    p.add_argument("--units", type=int, default=64)
    p.add_argument("--vocab", type=int, default=500)
    p.add_argument("--source-length", type=int, default=12)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--extras", type=int, default=0, help="width of the extras")
    p.add_argument("--runs", nargs="+", default=None, help="the runs to time")
    args = p.parse_args(argv)
    print_machine_info()
    step, state = build_step(
        args.units, args.vocab, args.source_length, args.sources, extras=args.extras
    )
    start_ids = ops.full((args.sources,), START, dtype="int32")
    for max_length in args.max_length:
        time_runs(args, step, state, start_ids, max_length)


def time_runs(args, step, state, start_ids, max_length):
    """Prints one JSON line: each run's first and later call at `max_length`."""
    runs = searches(step, state, start_ids, max_length, args.beam_size)
    runs.update(by_select_runs(step, state, start_ids, max_length, args.beam_size))
    if args.runs is not None:
        runs = {name: runs[name] for name in args.runs}
    firsts = {name: first_call(run) for name, run in runs.items()}
    # The later calls in interleaved rounds: the load hits every row alike.
    later = interleaved(
        {
            name: lambda run=run: ops.convert_to_numpy(run().ids)
            for name, run in runs.items()
        },
        repeats=args.repeats,
        number=1,
        warmup=0,
    )
    rows = {
        name: {
            "first_s": round(firsts[name], 4),
            "later_s": round(median(t), 4),
            "step_ms": round(1e3 * median(t) / max_length, 3),
        }
        for name, t in later.items()
    }
    settings = dict(vars(args), max_length=max_length)
    print(json.dumps({"backend": keras.backend.backend(), **settings, **rows}))


if __name__ == "__main__":
    main()
