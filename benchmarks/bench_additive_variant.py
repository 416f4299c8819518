"""The additive score as it was against as it is (BENCHMARKS.md, section 5).

Before: the bias added to the 4-D `(B, Tq, Tv, U)` sum, then
`sum(tanh(hidden) * v)`. Now (`keras_attn.additive.additive_scores`): the bias
joins the `(B, Tq, U)` query first, and `einsum` contracts with `v` (on JAX
the product and sum, which XLA fuses). Forward + backward of
`BahdanauAttention(256)` in a `tf.function`, batch 64, Tq 16, Tv 64, dim
256, interleaved rounds; the old form is swapped in by monkeypatching.

    python benchmarks/bench_additive_variant.py --repeats 7 --number 3
"""

import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def old_additive_scores(query, keys, v, bias=None, extra=None):
    from keras import ops

    hidden = ops.expand_dims(query, 2) + ops.expand_dims(keys, 1)
    if extra is not None:
        hidden = hidden + extra
    if bias is not None:
        hidden = hidden + bias
    return ops.sum(ops.tanh(hidden) * v, axis=-1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--number", type=int, default=3)
    args = p.parse_args(argv)

    import numpy as np
    import tensorflow as tf
    from common import interleaved, machine_info, median_ratio

    import keras_attn
    from keras_attn import additive

    rng = np.random.default_rng(0)
    query = tf.constant(rng.normal(size=(64, 16, 256)), tf.float32)
    value = tf.constant(rng.normal(size=(64, 64, 256)), tf.float32)
    layer = keras_attn.BahdanauAttention(256)
    layer([query, value])

    def step_with(scores):
        @tf.function
        def step(q, x):
            additive.additive_scores = scores
            with tf.GradientTape() as tape:
                tape.watch([q, x])
                loss = tf.reduce_sum(layer([q, x]))
            return tape.gradient(loss, [q, x, *layer.trainable_variables])

        return step

    now, before = additive.additive_scores, old_additive_scores
    steps = {"now": step_with(now), "before": step_with(before)}
    grads = {name: step(query, value) for name, step in steps.items()}
    additive.additive_scores = now
    diff = max(
        float(tf.reduce_max(tf.abs(a - b)))
        for a, b in zip(grads["now"], grads["before"], strict=True)
    )
    programs = {
        name: (lambda s=step: [g.numpy() for g in s(query, value)])
        for name, step in steps.items()
    }
    times = interleaved(programs, repeats=args.repeats, number=args.number)
    print(machine_info())
    for name, values in times.items():
        print(f"{name}: median {1000 * sorted(values)[len(values) // 2]:.0f} ms")
    print(f"time now / before: {median_ratio(times, 'now', 'before'):.2f}x")
    print(f"largest gradient difference: {diff:.1e}")


if __name__ == "__main__":
    main()
