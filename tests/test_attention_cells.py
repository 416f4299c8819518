"""The per-style attention cells: `style=`, old configs, Luong's options.

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


STYLE_CASES = [
    ("bahdanau", BahdanauAttentionCell, {}),
    ("luong", LuongAttentionCell, {"attention_units": 4}),
    ("self", SelfAttentionCell, {"max_length": 2}),
]


def _settings(cell):
    # The config but the names Keras numbers per layer made.
    skip = ("name", "cell", "attention")
    return {k: v for k, v in cell.get_config().items() if k not in skip}


def _outputs(cell, x, memory):
    inputs = x if cell.style == "self" else [x, memory]
    return _np(AttentionRNN(cell)(inputs))


@pytest.mark.parametrize("style, cls, kwargs", STYLE_CASES)
def test_the_style_argument_gives_the_cell_of_the_style_class(style, cls, kwargs):
    # One class, no `__new__`: `style` picks the style object; the class of
    # the style is the same cell with `style` fixed.
    made = AttentionCellWrapper(
        keras.layers.GRUCell(3), DotAttention(), style, **kwargs
    )
    own = cls(keras.layers.GRUCell(3), DotAttention(), **kwargs)
    assert type(made) is AttentionCellWrapper and made.style == style == cls.style
    assert isinstance(own, AttentionCellWrapper) and own.style == style

    assert _settings(made) == _settings(own)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 2)).astype("float32")
    memory = rng.normal(size=(2, 4, 3)).astype("float32")
    reference = _outputs(own, x, memory)
    _outputs(made, x, memory)
    made.set_weights(own.get_weights())
    np.testing.assert_allclose(_outputs(made, x, memory), reference, atol=1e-6)
    clone = AttentionCellWrapper.from_config(made.get_config())
    assert type(clone) is AttentionCellWrapper
    assert clone.get_config() == made.get_config()
    assert type(cls.from_config(own.get_config())) is cls


@pytest.mark.parametrize("style, cls, kwargs", STYLE_CASES)
def test_a_config_saved_before_the_style_classes_loads(style, cls, kwargs):
    # Such configs name `AttentionCellWrapper` and hold every style's
    # arguments, those of other styles as None.
    old = {
        "name": "attention_cell_wrapper",
        "cell": keras.saving.serialize_keras_object(keras.layers.GRUCell(3)),
        "attention": keras.saving.serialize_keras_object(DotAttention()),
        "style": style,
        "attention_units": None,
        "max_length": None,
        "memory_dim": None,
        "return_alignments": False,
        "kernel_initializer": "glorot_uniform",
        **kwargs,
    }
    cell = AttentionCellWrapper.from_config(old)
    expected = cls(keras.layers.GRUCell(3), DotAttention(), **kwargs)
    assert cell.style == style
    assert cell.state_size == expected.state_size
    assert _settings(cell) == _settings(expected)


def test_default_style_is_luong_and_a_class_keeps_its_style():
    cell = AttentionCellWrapper(keras.layers.GRUCell(3), DotAttention())
    assert cell.style == "luong" and cell.use_attention_layer
    with pytest.raises(ValueError, match="Received: style='bahdanau'"):
        LuongAttentionCell(keras.layers.GRUCell(3), DotAttention(), style="bahdanau")
    with pytest.raises(ValueError, match="Received: style='loung'"):
        AttentionCellWrapper(keras.layers.GRUCell(3), DotAttention(), style="loung")
    with pytest.raises(AttributeError, match="attention_kernel"):
        _ = BahdanauAttentionCell(
            keras.layers.GRUCell(3), DotAttention()
        ).attention_kernel


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
