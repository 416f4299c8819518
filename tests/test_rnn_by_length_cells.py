"""`bidirectional_by_length` with cells other than LSTM and GRU.

A SimpleRNN (one state) and stacked cells (a nested state: an LSTM's two
states, then a GRU's), against the masked Keras layer on a batch of mixed
lengths, empty and full rows included.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka


def _simple_rnn():
    return keras.layers.SimpleRNN(5, return_sequences=True, return_state=True)


def _stacked():
    cells = keras.layers.StackedRNNCells(
        [keras.layers.LSTMCell(4), keras.layers.GRUCell(5)]
    )
    return keras.layers.RNN(cells, return_sequences=True, return_state=True)


def _flat(states):
    flat = []
    for s in states:
        flat.extend(_flat(s) if isinstance(s, (list, tuple)) else [s])
    return flat


@pytest.mark.parametrize("make", [_simple_rnn, _stacked], ids=["simple", "stacked"])
def test_equals_the_masked_layer(make):
    rng = np.random.default_rng(0)
    rows, steps = 8, 6
    inputs = rng.standard_normal((rows, steps, 3)).astype("float32")
    lengths = np.array([6, 0, 3, 1, 6, 2, 5, 4], "int32")
    layer = keras.layers.Bidirectional(make())
    mask = np.arange(steps)[None] < lengths[:, None]
    expected = _flat(layer(inputs, mask=mask))
    got = _flat(ka.bidirectional_by_length(layer, inputs, lengths))
    assert len(got) == len(expected)
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(
            ops.convert_to_numpy(g), ops.convert_to_numpy(e), atol=2e-6
        )
    outputs = ops.convert_to_numpy(got[0])
    assert not outputs[~mask].any()
