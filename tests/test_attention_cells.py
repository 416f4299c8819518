"""The per-style attention cells: the factory, old configs, Luong's options.

`tests/test_recurrent.py` checks the math of each style; TFA's numbers for
the Luong options are checked in `tests/test_tfa_parity.py`.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn import (
    AttentionCellWrapper,
    AttentionRNN,
    BahdanauAttentionCell,
    DotAttention,
    LuongAttentionCell,
    SelfAttentionCell,
)


def _np(x):
    return ops.convert_to_numpy(x)


@pytest.mark.parametrize(
    "style, cls, kwargs",
    [
        ("bahdanau", BahdanauAttentionCell, {}),
        ("luong", LuongAttentionCell, {}),
        ("self", SelfAttentionCell, {"max_length": 2}),
    ],
)
def test_factory_builds_the_style_class(style, cls, kwargs):
    cell = AttentionCellWrapper(
        keras.layers.GRUCell(3), DotAttention(), style, **kwargs
    )
    assert type(cell) is cls and cell.style == style
    assert isinstance(cell, AttentionCellWrapper)
    clone = AttentionCellWrapper.from_config(cell.get_config())
    assert type(clone) is cls and clone.get_config() == cell.get_config()


def test_default_style_is_luong_and_a_class_keeps_its_style():
    assert type(AttentionCellWrapper(keras.layers.GRUCell(3), DotAttention())) is (
        LuongAttentionCell
    )
    with pytest.raises(ValueError, match="Received: style='bahdanau'"):
        LuongAttentionCell(keras.layers.GRUCell(3), DotAttention(), style="bahdanau")


def test_luong_options_are_checked():
    with pytest.raises(ValueError, match="Received: attention_units=5"):
        LuongAttentionCell(
            keras.layers.GRUCell(3),
            DotAttention(),
            use_attention_layer=False,
            attention_units=5,
        )
    with pytest.raises(ValueError, match="max_length"):
        AttentionCellWrapper(keras.layers.GRUCell(3), DotAttention(), "self")


def test_output_cell_state_feeds_the_attention_forward(tmp_path):
    # output_attention=False: the output is s_t, and h~_t (which the next
    # step reads) is a state of its own; the model saves and reloads.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 2)).astype("float32")
    memory = rng.normal(size=(2, 4, 3)).astype("float32")
    inputs = [keras.Input((3, 2)), keras.Input((4, 3))]
    cell = LuongAttentionCell(
        keras.layers.SimpleRNNCell(3),
        DotAttention(),
        attention_units=5,
        output_attention=False,
    )
    model = keras.Model(inputs, AttentionRNN(cell)(inputs))
    outputs = _np(model([x, memory]))
    assert outputs.shape == (2, 3, 3)

    # Step by step in numpy: s_t = tanh([x_t; h~_{t-1}] K + s_{t-1} R + b).
    kernel, recurrent, bias = (_np(w) for w in cell.cell.weights)
    w_c = _np(cell.attention_kernel)
    s, feed = np.zeros((2, 3)), np.zeros((2, 5))
    for t in range(3):
        s = np.tanh(np.concatenate([x[:, t], feed], -1) @ kernel + s @ recurrent + bias)
        scores = np.einsum("bd,btd->bt", s, memory)
        alpha = np.exp(scores - scores.max(-1, keepdims=True))
        alpha /= alpha.sum(-1, keepdims=True)
        context = np.einsum("bt,btd->bd", alpha, memory)
        feed = np.tanh(np.concatenate([context, s], -1) @ w_c)
        np.testing.assert_allclose(outputs[:, t], s, atol=1e-5)

    path = str(tmp_path / "model.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert type(reloaded.layers[-1].cell) is LuongAttentionCell
    np.testing.assert_allclose(_np(reloaded([x, memory])), outputs, atol=1e-6)
