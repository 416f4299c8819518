"""Where an XLA export's greedy call goes, and what a new shape costs.

For a run's model exported with `--xla` (`SearchOptions.xla`), at one
batch of test documents: the whole greedy search (text in, headlines out),
text to ids, the compiled encoder and search, the compiled encoder alone;
the `(S, S)` string comparison that `features._first_positions` replaced,
against it; then, from a SavedModel, each signature's first call (which
compiles) and second call at a few batch sizes. Medians of `--repeats`
calls after two untimed ones. Then one decoder step's pieces at the same
batch, each compiled inside a loop of `_LOOP` iterations (ms per
iteration): the output layer's matmul (its `(D, V)` kernel, and the `(V, D)`
rows with the transpose folded into the matmul), the copy distribution,
`argmax` against a max and a min, the decoder's LSTM cell, the attention,
and the whole step.

    python benchmarks/xla_pieces.py --run-dir runs/headlines_ema1 \\
        --model-dir saved_models/headlines_ema1/12 \\
        --data-dir ../shared/data/gigaword_sample
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run-dir", required=True, help="runs/<name> of a trained model")
    p.add_argument("--model-dir", required=True, help="its --xla export (a version)")
    p.add_argument("--data-dir", required=True, help="folder holding org_data/")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=20)
    return p.parse_args(argv)


# Iterations of each step piece's compiled loop.
_LOOP = 50


def median_ms(fn, repeats):
    fn(), fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * sorted(times)[len(times) // 2]


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf
    from common import machine_info

    from models.config import SearchOptions
    from models.features import _first_positions
    from models.inference import HeadlineModule
    from models.runs import load_run, load_trained_model

    _, features = load_run(args.run_dir)
    options = dataclasses.replace(SearchOptions.tuned(args.run_dir), xla=True)
    module = HeadlineModule(load_trained_model(args.run_dir), features, options)
    lines = (Path(args.data_dir) / "org_data" / "test.src.txt").read_text()
    docs = tf.constant(lines.splitlines()[: args.batch])
    spec = [tf.TensorSpec([None], tf.string)]
    search = tf.function(lambda d: module.search(d, 1)["headlines"], spec)
    encode = tf.function(features.encode_source, spec)
    source = encode(docs)
    ids, ext_ids = source["ids"], source["ext_ids"]
    args_ = (1, options.length_penalty, options.min_length, None)
    decode = tf.function(lambda i, e: module._decode_ids(i, e, *args_).ids)
    encoder = tf.function(
        lambda i, e: module.model.initial_decoder_state(i, e)[0], jit_compile=True
    )

    def compared(tokens):  # what `_first_positions` replaced
        same = tf.equal(tf.expand_dims(tokens, 2), tf.expand_dims(tokens, 1))
        return tf.argmax(tf.cast(same, tf.int32), axis=2, output_type=tf.int32)

    tokens = source["tokens"]
    old, new = tf.function(compared), tf.function(_first_positions)
    assert bool(tf.reduce_all(old(tokens) == new(tokens)))
    pieces = {
        "greedy search, whole": lambda: search(docs).numpy(),
        "text to ids": lambda: encode(docs)["ids"].numpy(),
        "encoder and search (XLA)": lambda: decode(ids, ext_ids).numpy(),
        "encoder alone (XLA)": lambda: encoder(ids, ext_ids),
        "first positions, (S, S) comparison": lambda: old(tokens).numpy(),
        "first positions, _first_positions": lambda: new(tokens).numpy(),
    }
    print(machine_info())
    print(f"batch {args.batch}, source length {int(ids.shape[1])}")
    for name, fn in pieces.items():
        print(f"| {name} | {median_ms(fn, args.repeats):.2f} ms |")
    signatures = tf.saved_model.load(args.model_dir).signatures
    for name in ("greedy", "serving_default"):
        for n in (1, 8, 64):
            batch = tf.constant(lines.splitlines()[:n])
            start = time.perf_counter()
            signatures[name](documents=batch)
            first = time.perf_counter() - start
            fn = signatures[name]
            second = median_ms(lambda f=fn, b=batch: f(documents=b), 3)
            print(f"| {name}, batch {n} | first call {first:.2f} s | {second:.0f} ms |")
    for name, ms in step_pieces(module.model, ids, ext_ids, args.repeats).items():
        print(f"| step: {name} | {ms:.3f} ms |")


def step_pieces(model, ids, ext_ids, repeats):
    """ms per call of each piece of one greedy step, compiled, in a loop."""
    import tensorflow as tf
    from profile_greedy import one_step

    from keras_attn.pointer import pointer_log_distribution
    from keras_attn.search_loop import argmax_first

    step = one_step(model, ids, ext_ids)
    state, memory, kernel = step["state"], step["memory"], step["kernel"]
    start, embedded, rnn_states = step["start"], step["embedded"], step["rnn_states"]
    output, weights, features = step["output"], step["weights"], step["features"]
    logits, p_gen = step["logits"], step["p_gen"]
    rows = tf.transpose(kernel)
    num_oov = model.config.max_source_length
    log_probs = pointer_log_distribution(p_gen, logits, weights, ext_ids, num_oov)

    pieces = {
        "output matmul, (D, V) kernel": lambda t: tf.matmul(features + t, kernel),
        "output matmul, (V, D) rows": lambda t: tf.matmul(
            features + t, rows, transpose_b=True
        ),
        "copy distribution": lambda t: pointer_log_distribution(
            p_gen, logits + t, weights, ext_ids, num_oov
        ),
        "argmax": lambda t: tf.argmax(log_probs + t, -1),
        "argmax as max and min": lambda t: argmax_first(log_probs + t, 0),
        "decoder LSTM cell": lambda t: model.decoder_rnn.cell(embedded + t, rnn_states)[
            0
        ],
        "attention": lambda t: model.attention.step(output + t, memory["attention"])[0],
        "whole step": lambda t: model.step(
            start, {k: v + t for k, v in state.items()}, memory, output_kernel=kernel
        )[0],
    }

    return {name: ms_per_iteration(piece, repeats) for name, piece in pieces.items()}


def ms_per_iteration(piece, repeats):
    """ms per call of `piece(t)`, compiled by XLA in a loop of `_LOOP` calls
    (medians of `repeats` loops); `t` moves with the loop counter, so that
    nothing is hoisted out of it."""
    import tensorflow as tf

    @tf.function(jit_compile=True)
    def run():
        def body(i, total):
            out = piece(tf.cast(i, tf.float32) * 1e-9)
            # The whole output is summed (one more pass over it), so that
            # XLA cannot compute only the part that is read.
            return i + 1, total + tf.reduce_sum(tf.cast(out, tf.float32))

        return tf.while_loop(lambda i, _: i < _LOOP, body, (0, 0.0))[1]

    return median_ms(lambda: run().numpy(), repeats) / _LOOP


if __name__ == "__main__":
    main()
