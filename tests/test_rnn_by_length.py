"""keras_attn.bidirectional_by_length against the masked Keras layer.

Each batch mixes full rows, empty rows and rows of every length in between,
unsorted, so that the rows are reordered and the batch is halved several
times before the longest row ends.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka

BACKEND = keras.backend.backend()


def _layer(cell, units=5):
    rnn = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU}[cell]
    return keras.layers.Bidirectional(
        rnn(units, return_sequences=True, return_state=True)
    )


def _batch(rows, steps, seed=0):
    rng = np.random.default_rng(seed)
    inputs = rng.standard_normal((rows, steps, 6)).astype("float32")
    lengths = rng.integers(0, steps + 1, size=rows).astype("int32")
    lengths[rows // 2] = steps
    lengths[-1] = 0
    return inputs, lengths


def _assert_same(expected, got):
    assert len(expected) == len(got)
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(
            ops.convert_to_numpy(g), ops.convert_to_numpy(e), atol=2e-6
        )


@pytest.mark.parametrize("cell", ["lstm", "gru"])
# 16 rows are halved four times before the longest ends; one step is the least.
@pytest.mark.parametrize("rows, steps", [(16, 9), (3, 1)])
def test_equals_the_masked_layer(cell, rows, steps):
    inputs, lengths = _batch(rows, steps)
    layer = _layer(cell)
    mask = np.arange(steps)[None] < lengths[:, None]
    expected = layer(inputs, mask=mask)
    got = ka.bidirectional_by_length(layer, inputs, lengths)
    _assert_same(expected, got)
    # Past a row's length the outputs are zeros; an empty row's states too.
    outputs = ops.convert_to_numpy(got[0])
    assert not outputs[~mask].any()
    assert not any(ops.convert_to_numpy(s)[lengths == 0].any() for s in got[1:])


def test_the_backward_direction_starts_at_each_rows_last_token():
    # Two rows that share their first 4 tokens; the first ends there.
    layer = _layer("lstm", units=3)
    rng = np.random.default_rng(1)
    tokens = rng.standard_normal((1, 4, 6)).astype("float32")
    rest = rng.standard_normal((2, 3, 6)).astype("float32")
    inputs = np.concatenate([np.concatenate([tokens, tokens]), rest], axis=1)
    outputs = ka.bidirectional_by_length(layer, inputs, np.array([4, 7]))[0]
    ended, longer = ops.convert_to_numpy(outputs)[:, :4]
    alone = ka.bidirectional_by_length(layer, tokens, np.array([4]))[0]
    np.testing.assert_allclose(ended, ops.convert_to_numpy(alone)[0], atol=1e-6)
    # The same forward outputs; the backward ones read the longer row's end.
    np.testing.assert_allclose(ended[:, :3], longer[:, :3], atol=1e-6)
    assert not np.allclose(ended[:, 3:], longer[:, 3:])


def test_many_rows_keep_their_last_stage():
    # More rows than the unrolled halvings reach: the last stage runs on.
    inputs, lengths = _batch(200, 5, seed=2)
    layer = _layer("gru", units=4)
    mask = np.arange(5)[None] < lengths[:, None]
    _assert_same(
        layer(inputs, mask=mask), ka.bidirectional_by_length(layer, inputs, lengths)
    )


@pytest.mark.tf_only
def test_xla_compiles_it_on_fixed_shapes():
    import tensorflow as tf

    inputs, lengths = _batch(16, 9, seed=3)
    layer = _layer("lstm")
    mask = np.arange(9)[None] < lengths[:, None]
    expected = layer(inputs, mask=mask)
    compiled = tf.function(
        lambda x, n: ka.bidirectional_by_length(layer, x, n), jit_compile=True
    )
    _assert_same(expected, compiled(inputs, lengths))
    # A dynamic batch, on TensorFlow's executor.
    dynamic = tf.function(
        lambda x, n: ka.bidirectional_by_length(layer, x, n),
        input_signature=[
            tf.TensorSpec([None, None, 6], tf.float32),
            tf.TensorSpec([None], tf.int32),
        ],
    )
    _assert_same(expected, dynamic(inputs, lengths))
    empty = dynamic(inputs[:0], lengths[:0])
    assert empty[0].shape == (0, 9, 10)


@pytest.mark.jax_only
def test_jax_jit_equals_eager():
    import jax

    inputs, lengths = _batch(16, 9, seed=4)
    layer = _layer("gru")
    layer(inputs)  # build
    eager = ka.bidirectional_by_length(layer, inputs, lengths)
    jitted = jax.jit(lambda x, n: ka.bidirectional_by_length(layer, x, n))
    _assert_same(eager, jitted(inputs, lengths))


def test_without_states_it_returns_the_outputs_alone():
    inputs, lengths = _batch(6, 5, seed=5)
    layer = keras.layers.Bidirectional(keras.layers.LSTM(3, return_sequences=True))
    mask = np.arange(5)[None] < lengths[:, None]
    expected = layer(inputs, mask=mask)
    got = ka.bidirectional_by_length(layer, inputs, lengths)
    _assert_same([expected], [got])


def test_a_layer_it_cannot_run_is_refused():
    layer = keras.layers.Bidirectional(
        keras.layers.LSTM(3, return_sequences=True), merge_mode="sum"
    )
    with pytest.raises(ValueError, match="merge_mode='concat'.*Received: layer="):
        ka.bidirectional_by_length(layer, np.zeros((1, 2, 3), "float32"), [2])
