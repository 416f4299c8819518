"""A row reduction of the output layer's scores, on the executor and under XLA.

A greedy step reads the `(64, V)` scores through reductions (the maximum,
the log-partition function). Under XLA on the CPU, a reduction that is the
scores' only consumer makes the matmul before it slow; this times the
cases that show it, each as one compiled function.

    python benchmarks/xla_reductions.py
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
from common import markdown_table, print_machine_info  # noqa: E402


def microseconds_per_call(fn, args, calls):
    for _ in range(5):
        fn(*args)
    start = time.perf_counter()
    for _ in range(calls):
        result = fn(*args)
    result.numpy()
    return (time.perf_counter() - start) / calls * 1e6


def row_max(z):
    return tf.reduce_max(z, axis=-1)


def log_partition(z):
    top = tf.reduce_max(z, axis=-1, keepdims=True)
    return tf.reduce_sum(tf.exp(z - top), axis=-1)


CASES = {
    "nothing (call overhead)": lambda x, w, s: s[:, :1] + 1.0,
    "x @ w": lambda x, w, s: tf.matmul(x, w),
    "max(x @ w)": lambda x, w, s: row_max(tf.matmul(x, w)),
    "max(x @ w) + (x @ w)[:, 0]": lambda x, w, s: (lambda z: row_max(z) + z[:, 0])(
        tf.matmul(x, w)
    ),
    "log-partition(x @ w)": lambda x, w, s: log_partition(tf.matmul(x, w)),
    "max(s), s given": lambda x, w, s: row_max(s),
    "log-partition(s), s given": lambda x, w, s: log_partition(s),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--depth", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    print_machine_info()
    x = tf.random.normal((args.rows, args.depth))
    w = tf.random.normal((args.depth, args.vocab))
    s = tf.random.normal((args.rows, args.vocab))
    rows = []
    for name, body in CASES.items():
        times = [
            microseconds_per_call(
                tf.function(body, jit_compile=jit, autograph=False),
                (x, w, s),
                args.calls,
            )
            for jit in (False, True)
        ]
        rows.append([name, f"{times[0]:.0f}", f"{times[1]:.0f}"])
        print(rows[-1], flush=True)
    print(f"rows {args.rows}, depth {args.depth}, vocabulary {args.vocab}")
    print(
        markdown_table(["computation", "executor, us a call", "XLA, us a call"], rows)
    )


if __name__ == "__main__":
    main()
