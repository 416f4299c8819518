"""Keras' bidirectional LSTM against three other ways to run the same encoder.

- `hoisted`: the input projection `x @ W` of every step does not depend on
  the recurrence, so it runs as one large matmul before the loop.
- `BlockLSTMV2`: TensorFlow's fused whole-sequence LSTM op (a core op, so
  stock TF Serving would load it), each direction one op; the backward one
  on the sequences reversed by their lengths.
- `by_length`: `keras_attn.bidirectional_by_length`, the rows sorted by
  length and the batch halved as they end (what the XLA export runs).

This checks that each agrees with Keras (outputs and final states) and times
them at the export's shape (128-wide embeddings, 128 units a direction),
compiled as TensorFlow functions on the executor, or by XLA (`--xla`): on
one batch of random lengths up to 45, or with `--data-dir` on the test
sources' lengths, padded as the XLA export pads them.

    python -m benchmarks.encoder_variants
    python -m benchmarks.encoder_variants --xla --batch 32 \\
        --data-dir ../shared/data/gigaword_sample
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402
from keras.src import backend as keras_backend  # noqa: E402

import keras_attn  # noqa: E402
from benchmarks.common import print_machine_info  # noqa: E402


@keras.saving.register_keras_serializable("benchmarks")
class HoistedLSTM(keras.layers.LSTM):
    """`keras.layers.LSTM` whose loop adds a precomputed `x @ W + b`."""

    def inner_loop(self, sequences, initial_state, mask, training=False):
        cell = self.cell
        projected = ops.matmul(sequences, cell.kernel) + cell.bias

        def step(z_x, states):
            h, c = states
            z = z_x + ops.matmul(h, cell.recurrent_kernel)
            z_i, z_f, z_c, z_o = ops.split(z, 4, axis=-1)
            c = cell.recurrent_activation(z_f) * c + cell.recurrent_activation(
                z_i
            ) * cell.activation(z_c)
            h = cell.recurrent_activation(z_o) * cell.activation(c)
            return h, [h, c]

        return keras_backend.rnn(
            step,
            projected,
            list(initial_state),
            go_backwards=self.go_backwards,
            mask=mask[0] if isinstance(mask, (list, tuple)) else mask,
            input_length=sequences.shape[1],
            zero_output_for_mask=self.zero_output_for_mask,
            return_all_outputs=self.return_sequences,
        )


def block_lstm_direction(layer, time_major, lengths, reverse):
    """One direction by `BlockLSTMV2` (gates in Keras' i, f, c, o order)."""
    cell = layer.cell
    if reverse:
        time_major = tf.reverse_sequence(time_major, lengths, seq_axis=0, batch_axis=1)
    batch = tf.shape(time_major)[1]
    zeros = tf.zeros((batch, cell.units))
    no_peephole = tf.zeros((cell.units,))
    _, cells, _, _, _, _, hidden = tf.raw_ops.BlockLSTMV2(
        seq_len_max=tf.cast(tf.reduce_max(lengths), tf.int64),
        x=time_major,
        cs_prev=zeros,
        h_prev=zeros,
        w=tf.concat([cell.kernel, cell.recurrent_kernel], 0),
        wci=no_peephole,
        wcf=no_peephole,
        wco=no_peephole,
        b=cell.bias,
        cell_clip=0.0,
        use_peephole=False,
    )
    last = tf.stack([tf.maximum(lengths - 1, 0), tf.range(batch)], 1)
    final = [tf.gather_nd(hidden, last), tf.gather_nd(cells, last)]
    if reverse:
        hidden = tf.reverse_sequence(hidden, lengths, seq_axis=0, batch_axis=1)
    return tf.transpose(hidden, (1, 0, 2)), final


def block_lstm_bidirectional(encoder, x, mask):
    """`encoder(x, mask=mask)`'s outputs, by two `BlockLSTMV2` ops."""
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), 1)
    time_major = tf.transpose(x, (1, 0, 2))
    forward, forward_final = block_lstm_direction(
        encoder.forward_layer, time_major, lengths, False
    )
    backward, backward_final = block_lstm_direction(
        encoder.backward_layer, time_major, lengths, True
    )
    memory = tf.concat([forward, backward], -1) * tf.cast(mask, x.dtype)[..., None]
    return [memory, *forward_final, *backward_final]


def _batches(args, rng):
    """`(inputs, lengths, mask)` batches: the test sources' lengths in order
    (whitespace tokens, at most 64), padded as the XLA export pads them (a
    multiple of 16); else one batch of random lengths up to 45."""
    if args.data_dir is None:
        lengths = rng.integers(10, 46, size=args.batch)
        lengths[0] = 45
        all_lengths, step = [lengths], 45
    else:
        path = Path(args.data_dir) / "org_data" / "test.src.txt"
        counts = [min(len(line.split()), 64) for line in path.open(encoding="utf-8")]
        all_lengths = [
            np.array(counts[i : i + args.batch])
            for i in range(0, args.batch * args.batches, args.batch)
        ]
        step = 16
    batches = []
    for lengths in all_lengths:
        steps = -(-int(lengths.max()) // step) * step
        x = rng.standard_normal((len(lengths), steps, 128)).astype("float32")
        mask = np.arange(steps)[None] < lengths[:, None]
        batches.append((x, lengths.astype("int32"), mask))
    return batches


def print_row_steps(path, batch):
    """The encoder's row-steps over the whole test split in batches of
    `batch`: padded as the XLA export pads them, the words among them, and
    those `bidirectional_by_length` runs (the batch halved as rows end)."""
    counts = [min(len(line.split()), 64) for line in path.open(encoding="utf-8")]
    padded = words = by_length = 0
    for start in range(0, len(counts) - batch + 1, batch):
        lengths = np.array(counts[start : start + batch])
        padded += batch * -(-int(lengths.max()) // 16) * 16
        words += int(lengths.sum())
        rows = batch
        for t in range(int(lengths.max())):
            while rows > 1 and (lengths > t).sum() <= rows // 2:
                rows //= 2
            by_length += rows
    print(
        f"row-steps, batches of {batch}: words {words / padded:.0%} of the "
        f"padded ones; by length {by_length / padded:.0%} of them "
        f"({words / by_length:.0%} words)"
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--xla", action="store_true", help="compile each with XLA")
    p.add_argument("--data-dir", help="folder holding org_data/: its test lengths")
    p.add_argument("--batches", type=int, default=8, help="with --data-dir")
    args = p.parse_args()
    print_machine_info()
    if args.data_dir is not None:
        path = Path(args.data_dir) / "org_data" / "test.src.txt"
        print_row_steps(path, args.batch)
    rng = np.random.default_rng(0)
    batches = _batches(args, rng)
    x, lengths, mask = batches[0]
    encoders = {
        name: keras.layers.Bidirectional(
            layer(128, return_sequences=True, return_state=True)
        )
        for name, layer in (("keras", keras.layers.LSTM), ("hoisted", HoistedLSTM))
    }
    for encoder in encoders.values():
        encoder(x, mask=mask)
    encoders["hoisted"].set_weights(encoders["keras"].get_weights())
    calls = {
        name: tf.function(
            lambda x, n, m, e=encoder: e(x, mask=m),
            autograph=False,
            jit_compile=args.xla,
        )
        for name, encoder in encoders.items()
    }
    calls["by_length"] = tf.function(
        lambda x, n, m: keras_attn.bidirectional_by_length(encoders["keras"], x, n),
        autograph=False,
        jit_compile=args.xla,
    )
    if not args.xla:  # BlockLSTMV2 has no XLA kernel
        calls["BlockLSTMV2"] = tf.function(
            lambda x, n, m: block_lstm_bidirectional(encoders["keras"], x, m),
            autograph=False,
        )
    for name in [n for n in calls if n != "keras"]:
        difference = max(
            float(np.abs(np.asarray(a) - np.asarray(b)).max())
            for batch in batches
            for a, b in zip(calls["keras"](*batch), calls[name](*batch), strict=True)
        )
        print(f"largest difference from Keras, {name}: {difference:.2e}")
    calls_each = max(1, 30 // len(batches))
    for round_ in range(3):
        for name, call in calls.items():
            for batch in batches:
                call(*batch)
            start = time.perf_counter()
            for _ in range(calls_each):
                for batch in batches:
                    result = call(*batch)
            result[0].numpy()
            ms = (time.perf_counter() - start) / calls_each / len(batches) * 1e3
            print(f"round {round_ + 1}, {name}: {ms:.2f} ms a batch")


if __name__ == "__main__":
    main()
