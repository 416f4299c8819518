"""float32 against bfloat16 matmuls, on TensorFlow's executor and under XLA.

Does this CPU's bfloat16 hardware (AVX512-BF16, AMX) reach the decoding
step's shapes, and does XLA use it? Times `a @ b` and `max(a @ b, -1)` (what
a greedy step reads of the output layer) at the decode shape (64 rows by a
10,000-word vocabulary), a recurrent cell's shape and 2048^3. XLA's CPU
flags are passed through the environment, e.g.
`XLA_FLAGS=--xla_cpu_use_onednn=true python benchmarks/matmul_dtypes.py`.

    python benchmarks/matmul_dtypes.py
"""

from __future__ import annotations

import argparse
import os
import time

import tensorflow as tf  # noqa: E402
from common import markdown_table, print_machine_info  # noqa: E402

SHAPES = ((64, 128, 10_000), (64, 256, 10_000), (64, 128, 512), (2048, 2048, 2048))


def seconds_per_call(fn, a, b, calls):
    for _ in range(5):
        fn(a, b)
    start = time.perf_counter()
    for _ in range(calls):
        result = fn(a, b)
    result.numpy()
    return (time.perf_counter() - start) / calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    print_machine_info()
    print(f"# XLA_FLAGS: {os.environ.get('XLA_FLAGS', '')}")
    bodies = {
        "a @ b": lambda a, b: tf.matmul(a, b),
        "max(a @ b)": lambda a, b: tf.reduce_max(
            tf.cast(tf.matmul(a, b), tf.float32), axis=-1
        ),
    }
    rows = []
    for m, k, n in SHAPES:
        calls = max(5, args.calls // 20) if m >= 1024 else args.calls
        for body_name, body in bodies.items():
            for jit in (False, True):
                times = {}
                for dtype in (tf.float32, tf.bfloat16):
                    a = tf.cast(tf.random.normal((m, k)), dtype)
                    b = tf.cast(tf.random.normal((k, n)), dtype)
                    fn = tf.function(body, jit_compile=jit, autograph=False)
                    times[dtype.name] = seconds_per_call(fn, a, b, calls)
                flop = 2 * m * k * n
                rows.append(
                    [
                        f"{m}x{k}x{n}",
                        body_name,
                        "XLA" if jit else "executor",
                        f"{times['float32'] * 1e6:.0f}",
                        f"{flop / times['float32'] / 1e9:.0f}",
                        f"{times['bfloat16'] * 1e6:.0f}",
                        f"{flop / times['bfloat16'] / 1e9:.0f}",
                        f"{times['float32'] / times['bfloat16']:.2f}x",
                    ]
                )
                print(rows[-1], flush=True)
    print(
        markdown_table(
            [
                "m x k x n",
                "op",
                "runtime",
                "fp32 us",
                "fp32 GFLOP/s",
                "bf16 us",
                "bf16 GFLOP/s",
                "bf16 speed-up",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
