"""Forward+backward time of each keras_attn score against the nearest Keras built-in.

Pairs (same math on both sides):

| keras_attn | Keras built-in |
|---|---|
| DotAttention() | Attention() |
| DotAttention(use_scale) | Attention(use_scale=True) |
| ScaledDotAttention() | Attention() on the query times 1/sqrt(d) |
| GeneralAttention() | Dense(d, no bias) on the query, then Attention() |
| ConcatAttention(units) | Dense W1 on keys, Dense W2 on query (no biases), |
|  | AdditiveAttention(use_scale=True) ([W2 q, v, W1 k]) |
| BahdanauAttention(units) | same, W2 with a bias (the score's `b`) |

Keras' `AdditiveAttention` has no W1/W2/v of its own: its learned `scale`
vector plays the part of `v`, and the projections are added around it.

Each side is one Keras model; the timed program is its gradient (of the sum
of the context, w.r.t. the query, the values and all weights), compiled the
same way for both sides: `tf.function` (TF; with and without
`jit_compile=True`) or `jax.jit` (JAX). Reported: time keras_attn /
time built-in, median of interleaved rounds (<= 1: keras_attn no slower).

    nice -n 19 python -m benchmarks.bench_layers                  # TensorFlow
    nice -n 19 python -m benchmarks.bench_layers --backend jax    # JAX (own process)
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path

SCORES = ("dot", "dot-scale", "scaled-dot", "general", "concat", "bahdanau")

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="tensorflow", choices=("tensorflow", "jax"))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--tq", type=int, default=16)
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--units", type=int, default=256, help="additive scores' units")
    p.add_argument("--tv", type=int, nargs="+", default=[16, 64, 256, 1024])
    p.add_argument("--scores", nargs="+", default=list(SCORES), choices=SCORES)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument(
        "--target-seconds",
        type=float,
        default=0.15,
        help="aim for timings of about this long (sets calls per timing)",
    )
    p.add_argument(
        "--no-xla", action="store_true", help="TF: skip the jit_compile column"
    )
    return p.parse_args(argv)


def _models(score, dim, units):
    """(keras_attn model, built-in model) over inputs [query, value]."""
    import keras

    import keras_attn

    q_in = keras.Input((None, dim), name="query")
    v_in = keras.Input((None, dim), name="value")
    if score == "dot":
        ours = keras_attn.DotAttention()([q_in, v_in])
        ref = keras.layers.Attention()([q_in, v_in])
    elif score == "dot-scale":
        ours = keras_attn.DotAttention(use_scale=True)([q_in, v_in])
        ref = keras.layers.Attention(use_scale=True)([q_in, v_in])
    elif score == "scaled-dot":
        ours = keras_attn.ScaledDotAttention()([q_in, v_in])
        inv = 1.0 / math.sqrt(dim)
        scaled = keras.layers.Rescaling(inv)(q_in)
        ref = keras.layers.Attention()([scaled, v_in])
    elif score == "general":
        ours = keras_attn.GeneralAttention()([q_in, v_in])
        wq = keras.layers.Dense(dim, use_bias=False)(q_in)
        ref = keras.layers.Attention()([wq, v_in])
    else:
        bias = score == "bahdanau"
        layer = (
            keras_attn.BahdanauAttention(units)
            if bias
            else keras_attn.ConcatAttention(units)
        )
        ours = layer([q_in, v_in])
        w2q = keras.layers.Dense(units, use_bias=bias)(q_in)
        w1k = keras.layers.Dense(units, use_bias=False)(v_in)
        ref = keras.layers.AdditiveAttention(use_scale=True)([w2q, v_in, w1k])
    return keras.Model([q_in, v_in], ours), keras.Model([q_in, v_in], ref)


def _tf_grad_program(model, q, v, jit):
    """A zero-argument call of the model's gradient (`tf.function`); it blocks."""
    import tensorflow as tf

    @tf.function(jit_compile=jit)
    def fwd_bwd(q, v):
        with tf.GradientTape() as tape:
            tape.watch([q, v])
            loss = tf.reduce_sum(model([q, v]))
        return tape.gradient(loss, [q, v, *model.trainable_variables])

    q, v = tf.constant(q), tf.constant(v)
    return lambda: [g.numpy() for g in fwd_bwd(q, v)][0]


def _jax_grad_program(model, q, v, jit):
    """A zero-argument call of the model's gradient (`jax.jit`); it blocks."""
    import jax

    trainable = [w.value for w in model.trainable_variables]
    frozen = [w.value for w in model.non_trainable_variables]

    def loss(trainable, q, v):
        out, _ = model.stateless_call(trainable, frozen, [q, v])
        return out.sum()

    fn = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    q, v = jax.numpy.asarray(q), jax.numpy.asarray(v)
    return lambda: jax.block_until_ready(fn(trainable, q, v))


def _grad_program_and_modes(backend, no_xla):
    """The backend's gradient program builder and its `(column, jit)` modes."""
    if backend == "tensorflow":
        modes = [("tf.function", False)] + (
            [] if no_xla else [("tf.function+XLA", True)]
        )
        return _tf_grad_program, modes
    return _jax_grad_program, [("jax.jit", True)]


def _time_pair(ours_model, ref_model, q, v, grad_program, modes, args):
    """Times both models in each mode: (ours ms per mode, ratio per mode)."""
    from benchmarks import common

    times_ms, ratios = [], []
    for _, jit in modes:
        programs = {
            "ours": grad_program(ours_model, q, v, jit),
            "builtin": grad_program(ref_model, q, v, jit),
        }
        for fn in programs.values():  # compile, then calibrate
            fn()
        start = time.perf_counter()
        programs["ours"]()
        once = time.perf_counter() - start
        number = max(1, min(50, round(args.target_seconds / max(once, 1e-6))))
        t = common.interleaved(programs, repeats=args.repeats, number=number, warmup=1)
        times_ms.append(1e3 * common.median(t["ours"]))
        ratios.append(common.median_ratio(t, "ours", "builtin"))
    return times_ms, ratios


def main(argv=None):
    args = parse_args(argv)
    if os.environ.get("KERAS_BACKEND") != args.backend:
        # The backend is fixed at import time: rerun in a fresh process.
        env = dict(os.environ, KERAS_BACKEND=args.backend)
        module = [sys.executable, "-m", "benchmarks.bench_layers"]
        return subprocess.call(module + sys.argv[1:], env=env, cwd=ROOT)
    import keras
    import numpy as np

    # Imported before any output, so that a broken install fails first.
    import keras_attn  # noqa: F401
    from benchmarks import common

    backend = keras.backend.backend()
    grad_program, modes = _grad_program_and_modes(backend, args.no_xla)
    common.print_machine_info()
    print(
        f"# backend {backend}, batch {args.batch}, Tq {args.tq}, dim {args.dim}, "
        f"units {args.units}, repeats {args.repeats}"
    )
    rng = np.random.default_rng(0)
    header = (
        ["score", "Tv"]
        + [f"{m} ours ms" for m, _ in modes]
        + [f"{m} ratio" for m, _ in modes]
    )
    rows = []
    for score in args.scores:
        for tv in args.tv:
            q = rng.standard_normal((args.batch, args.tq, args.dim), dtype=np.float32)
            v = rng.standard_normal((args.batch, tv, args.dim), dtype=np.float32)
            ours_model, ref_model = _models(score, args.dim, args.units)
            times_ms, ratios = _time_pair(
                ours_model, ref_model, q, v, grad_program, modes, args
            )
            rows.append([score, tv, *times_ms, *ratios])
            print(
                " ".join(
                    f"{x:.3g}" if isinstance(x, float) else str(x) for x in rows[-1]
                ),
                flush=True,
            )
    print()
    print(common.markdown_table(header, rows))
    print(f"\n# peak RSS {common.peak_rss_mib():.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
