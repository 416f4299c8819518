"""Would int8 weights speed up the output layer of a greedy step? (issue 17)

The output layer of the summarizer is a `(N, D) x (D, V)` product with the
tied embedding matrix, then one pass over the `(N, V)` logits for the
partition function and the maximum (what greedy search reads of them). This
times, under XLA and on TensorFlow's executor, each piece compiled inside a
loop (`xla_pieces.ms_per_iteration`; executor: medians of single calls):

* the float32 product, and the same as an int8 x int8 product with int32
  accumulation (`BatchMatMulV3`), the features quantized per row on the fly
  and the matrix per vocabulary word, ahead of time;
* each with what greedy does next: the logits (the int8 ones scaled back to
  float32), their log-partition function and their maximum.

It prints the log-partition functions' largest difference (the int8 error).

    python benchmarks/int8_output_layer.py --run-dir runs/headlines_ema1
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run-dir", required=True, help="runs/<name> (tied embeddings)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=30)
    return p.parse_args(argv)


def quantize_rows(x):
    """int8 values and float32 `(rows, 1)` scales: `x ~ values * scales`."""
    import tensorflow as tf

    scale = tf.maximum(tf.reduce_max(tf.abs(x), axis=1, keepdims=True), 1e-12) / 127.0
    return tf.cast(tf.round(x / scale), tf.int8), scale


def main(argv=None):
    args = parse_args(argv)
    import numpy as np
    import tensorflow as tf
    from common import machine_info
    from xla_pieces import median_ms, ms_per_iteration

    from models.runs import load_trained_model

    model = load_trained_model(args.run_dir)
    rows = tf.convert_to_tensor(model.embedding.embeddings)  # (V, D)
    kernel = tf.transpose(rows)  # (D, V), as `output_kernel()` gives it
    quantized, word_scale = quantize_rows(rows)
    quantized_kernel = tf.transpose(quantized)  # int8 (D, V)
    word_scale = tf.transpose(word_scale)  # (1, V)
    features = tf.constant(
        np.random.default_rng(0)
        .normal(0.0, 1.0, (args.batch, rows.shape[1]))
        .astype("float32")
    )

    def float_logits(x):
        return tf.matmul(x, kernel)

    def int8_logits(x):
        values, scale = quantize_rows(x)
        product = tf.raw_ops.BatchMatMulV3(x=values, y=quantized_kernel, Tout=tf.int32)
        return tf.cast(product, tf.float32) * scale * word_scale

    def then_greedy(logits_fn):
        def piece(x):
            logits = logits_fn(x)
            return tf.reduce_logsumexp(logits, axis=1) + tf.reduce_max(logits, axis=1)

        return piece

    error = tf.reduce_max(
        tf.abs(
            tf.reduce_logsumexp(float_logits(features), axis=1)
            - tf.reduce_logsumexp(int8_logits(features), axis=1)
        )
    )
    print(machine_info())
    print(
        f"output layer {args.batch} x {rows.shape[1]} by {rows.shape[1]} x "
        f"{rows.shape[0]}; int8 log-partition error, largest: {float(error):.2e}"
    )
    pieces = {
        "product, float32": float_logits,
        "product, int8": int8_logits,
        "product + log-partition + max, float32": then_greedy(float_logits),
        "product + log-partition + max, int8": then_greedy(int8_logits),
    }
    print("| piece | XLA, ms | executor, ms |")
    print("|---|---|---|")
    for name, piece in pieces.items():
        xla = ms_per_iteration(lambda t, p=piece: p(features + t), args.repeats)
        executor_fn = tf.function(lambda p=piece: p(features), autograph=False)
        executor_fn()
        executor = median_ms(lambda f=executor_fn: f().numpy(), args.repeats)
        print(f"| {name} | {xla:.3f} | {executor:.3f} |")


if __name__ == "__main__":
    main()
