"""Per-step decoder attention: keras_attn's step API against re-projecting the memory.

keras_attn: `BahdanauAttention.prepare_memory` once per source (the `W1 k`
projection), then `step(query, memory)` per decoder step (only `W2 q`, the
score and the context).

Reference: the TensorFlow "NMT with attention" tutorial's `BahdanauAttention`
layer (`W1`, `W2`, `V` Dense layers; `V(tanh(W1(values) + W2(query)))`),
called on the whole memory at every step, so `W1 values` is recomputed
`steps` times. Also timed: keras_attn's own `call` at every step (same
recomputation, through our layer).

Each program decodes `--steps` steps, the next query depending on the last
context (as in a decoder), inside one `tf.function` (and eagerly, one op at a
time, as the tutorial's translate loop does). Per-step time = program time /
steps, `prepare_memory` included. Reported: reference / keras_attn
(speed-up), median of interleaved rounds.

    nice -n 19 python -m benchmarks.bench_decoder_step
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--units", type=int, default=256)
    p.add_argument("--tv", type=int, nargs="+", default=[50, 400])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--number", type=int, default=3)
    p.add_argument("--no-eager", action="store_true")
    return p.parse_args(argv)


def _tutorial_bahdanau(units):
    """A new instance of the TF NMT tutorial's `BahdanauAttention` layer."""
    import keras
    import tensorflow as tf

    class TutorialBahdanau(keras.layers.Layer):
        """The TF NMT tutorial's layer, verbatim in substance."""

        def __init__(self, units):
            super().__init__()
            self.W1 = keras.layers.Dense(units)
            self.W2 = keras.layers.Dense(units)
            self.V = keras.layers.Dense(1)

        def call(self, query, values):
            query_with_time_axis = tf.expand_dims(query, 1)
            score = self.V(tf.nn.tanh(self.W1(values) + self.W2(query_with_time_axis)))
            attention_weights = tf.nn.softmax(score, axis=1)
            context_vector = tf.reduce_sum(attention_weights * values, axis=1)
            return context_vector, attention_weights

    return TutorialBahdanau(units)


def _measure(tv, args, rng, modes):
    """One table row: per-step times and speed-ups at memory length `tv`."""
    import numpy as np
    import tensorflow as tf

    import keras_attn
    from benchmarks import common

    values = tf.constant(rng.standard_normal((args.batch, tv, args.units), np.float32))
    query0 = tf.constant(rng.standard_normal((args.batch, args.units), np.float32))
    ours = keras_attn.BahdanauAttention(args.units)
    ours([query0, values])
    tutorial = _tutorial_bahdanau(args.units)
    tutorial(query0, values)

    def decode_ours(query, values):
        memory = ours.prepare_memory(values)
        for _ in range(args.steps):
            context, _ = ours.step(query, memory)
            query = tf.tanh(context)
        return query

    def decode_call(query, values):
        for _ in range(args.steps):
            context = ours([query, values])
            query = tf.tanh(context)
        return query

    def decode_tutorial(query, values):
        for _ in range(args.steps):
            context, _ = tutorial(query, values)
            query = tf.tanh(context)
        return query

    row = [tv]
    for _, graph in modes:
        fns = {
            "step API": decode_ours,
            "tutorial": decode_tutorial,
            "our call/step": decode_call,
        }
        if graph:
            fns = {k: tf.function(f) for k, f in fns.items()}
        programs = {k: (lambda f=f: f(query0, values).numpy()) for k, f in fns.items()}
        t = common.interleaved(programs, repeats=args.repeats, number=args.number)
        per_step = {k: 1e3 * common.median(v) / args.steps for k, v in t.items()}
        row += [
            per_step["step API"],
            per_step["tutorial"],
            common.median_ratio(t, "tutorial", "step API"),
            common.median_ratio(t, "our call/step", "step API"),
        ]
    return row


def main(argv=None):
    args = parse_args(argv)
    # All imported before the machine info, which lists the versions of the
    # libraries loaded.
    import keras  # noqa: F401
    import numpy as np
    import tensorflow  # noqa: F401

    import keras_attn  # noqa: F401
    from benchmarks import common

    common.print_machine_info()
    print(
        f"# batch {args.batch}, units {args.units}, steps {args.steps}, "
        f"repeats {args.repeats} x {args.number}"
    )
    rng = np.random.default_rng(0)
    modes = [("tf.function", True)] + ([] if args.no_eager else [("eager", False)])
    rows = []
    for tv in args.tv:
        row = _measure(tv, args, rng, modes)
        rows.append(row)
        print(row, flush=True)

    header = ["Tv"]
    for mode, _ in modes:
        header += [
            f"{mode}: step API ms/step",
            f"{mode}: tutorial ms/step",
            f"{mode}: speed-up vs tutorial",
            f"{mode}: speed-up vs our call",
        ]
    print()
    print(common.markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
