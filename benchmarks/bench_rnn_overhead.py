"""The time `AttentionRNN` adds to a training step over a plain Keras GRU.

The toy of tests/test_recurrent.py: reverse a sequence of 8 tokens out of 10,
an `Embedding` + `GRU(32)` encoder and a decoder over the teacher-forced
target, batch 64. "plain": the decoder is `keras.layers.GRU(32)` from the
encoder's final state; "attention": `AttentionRNN` over
`AttentionCellWrapper(GRUCell(32), BahdanauAttention(32), style="bahdanau")`.
Each program's `train_on_batch` is timed in interleaved rounds
(`common.interleaved`); reported: ms per step (medians) and the median
per-round ratio attention / plain. `--profile` prints cProfile's top
functions of the attention step instead.

    KERAS_BACKEND=torch python -m benchmarks.bench_rnn_overhead --threads 1
    KERAS_BACKEND=torch python -m benchmarks.bench_rnn_overhead --profile
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn as ka  # noqa: E402
from benchmarks.common import interleaved  # noqa: E402

LENGTH, VOCAB, START, UNITS, BATCH = 8, 10, 11, 32, 64


def toy_model(attention):
    """The reverser, with or without the attention decoder, compiled."""
    src = keras.Input((LENGTH,), dtype="int32")
    dec = keras.Input((LENGTH,), dtype="int32")
    memory, state = keras.layers.GRU(UNITS, return_sequences=True, return_state=True)(
        keras.layers.Embedding(VOCAB + 2, 16)(src)
    )
    embedded = keras.layers.Embedding(VOCAB + 2, 16)(dec)
    if attention:
        cell = ka.AttentionCellWrapper(
            keras.layers.GRUCell(UNITS), ka.BahdanauAttention(UNITS), style="bahdanau"
        )
        hidden = ka.AttentionRNN(cell)([embedded, memory], initial_state=state)
    else:
        hidden = keras.layers.GRU(UNITS, return_sequences=True)(
            embedded, initial_state=state
        )
    model = keras.Model([src, dec], keras.layers.Dense(VOCAB + 2)(hidden))
    model.compile(
        keras.optimizers.Adam(0.01),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def toy_batch(rng):
    src = rng.integers(1, VOCAB + 1, size=(BATCH, LENGTH))
    target = src[:, ::-1]
    decoder_in = np.concatenate([np.full((BATCH, 1), START), target[:, :-1]], 1)
    return [src, decoder_in], target


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--number", type=int, default=10)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--threads", type=int, default=1, help="torch's intra-op threads")
    args = p.parse_args(argv)
    if keras.config.backend() == "torch":
        import torch

        torch.set_num_threads(args.threads)
    keras.utils.set_random_seed(0)
    x, y = toy_batch(np.random.default_rng(0))
    models = {name: toy_model(name == "attention") for name in ("plain", "attention")}
    programs = {
        name: (lambda m=m: m.train_on_batch(x, y)) for name, m in models.items()
    }
    if args.profile:
        for _ in range(3):
            programs["attention"]()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.number):
            programs["attention"]()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return
    times = interleaved(programs, repeats=args.repeats, number=args.number)
    ratios = [a / p for a, p in zip(times["attention"], times["plain"], strict=True)]
    for name, seconds in times.items():
        print(f"{name}: {1000 * statistics.median(seconds):.1f} ms per step")
    print(f"ratio attention / plain: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
