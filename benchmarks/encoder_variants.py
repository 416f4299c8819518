"""Keras' bidirectional LSTM against two other ways to run the same encoder.

- `hoisted`: the input projection `x @ W` of every step does not depend on
  the recurrence, so it runs as one large matmul before the loop.
- `BlockLSTMV2`: TensorFlow's fused whole-sequence LSTM op (a core op, so
  stock TF Serving would load it), each direction one op; the backward one
  on the sequences reversed by their lengths.

This checks that each agrees with Keras (outputs at the real positions and
final states) and times them at the export's shape (64 documents of up to 45
tokens, 128-wide embeddings, 128 units a direction), compiled as TensorFlow
functions on the executor.

    python benchmarks/encoder_variants.py
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from common import print_machine_info  # noqa: E402
from keras import ops  # noqa: E402
from keras.src import backend as keras_backend  # noqa: E402


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


def main():
    print_machine_info()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 45, 128)).astype("float32")
    lengths = rng.integers(10, 46, size=64)
    lengths[0] = 45
    mask = np.arange(45)[None] < lengths[:, None]
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
        name: tf.function(lambda x, m, e=encoder: e(x, mask=m), autograph=False)
        for name, encoder in encoders.items()
    }
    calls["BlockLSTMV2"] = tf.function(
        lambda x, m: block_lstm_bidirectional(encoders["keras"], x, m),
        autograph=False,
    )
    reference = calls["keras"](x, mask)
    for name in ("hoisted", "BlockLSTMV2"):
        difference = max(
            float(np.abs(np.asarray(a) - np.asarray(b)).max())
            for a, b in zip(reference, calls[name](x, mask), strict=True)
        )
        print(f"largest difference from Keras, {name}: {difference:.2e}")
    for round_ in range(3):
        for name, call in calls.items():
            for _ in range(3):
                call(x, mask)
            start = time.perf_counter()
            for _ in range(30):
                result = call(x, mask)
            result[0].numpy()
            ms = (time.perf_counter() - start) / 30 * 1e3
            print(f"round {round_ + 1}, {name}: {ms:.2f} ms a call")


if __name__ == "__main__":
    main()
