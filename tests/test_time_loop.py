"""`AttentionRNN`'s own time loop on torch against Keras' `RNN` loop.

On torch `AttentionRNN` runs the cell itself (`keras_attn.recurrent.time_loop`); with
`loop_calls_cell_directly` patched to say no, the same layer runs Keras'
generic loop. Both must give the same outputs, final states and gradients
(with respect to the weights, the inputs and the memory) on a masked batch.
"""

import keras
import numpy as np
import pytest

import keras_attn.recurrent.rnn
from keras_attn import (
    AttentionCellWrapper,
    AttentionRNN,
    BahdanauAttention,
    GeneralAttention,
    ScaledDotAttention,
)
from keras_attn.recurrent import time_loop

pytestmark = pytest.mark.torch_only

B, T, TV, D, DM, UNITS = 3, 5, 4, 6, 7, 8
# Right padding, a fully masked row and a hole in the middle.
SEQUENCE_MASK = np.array(
    [[1, 1, 1, 0, 0], [0, 0, 0, 0, 0], [1, 0, 1, 1, 1]], dtype=bool
)
MEMORY_MASK = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 0]], dtype=bool)


def _cell(style):
    if style == "self":
        return AttentionCellWrapper(
            keras.layers.GRUCell(UNITS),
            ScaledDotAttention(),
            style="self",
            max_length=3,
        )
    # Luong: an LSTM (two states) feeding its attentional state in a state.
    luong = style == "luong"
    return AttentionCellWrapper(
        keras.layers.LSTMCell(UNITS) if luong else keras.layers.GRUCell(UNITS),
        GeneralAttention() if luong else BahdanauAttention(5),
        style=style,
        return_alignments=True,
        **({"output_attention": False} if luong else {}),
    )


def _layer(style, seed=0, **layer_kwargs):
    keras.utils.set_random_seed(seed)
    return AttentionRNN(_cell(style), return_state=True, **layer_kwargs)


def _arrays():
    rng = np.random.default_rng(1)
    return (
        rng.normal(size=(B, T, D)).astype("float32"),
        rng.normal(size=(B, TV, DM)).astype("float32"),
    )


def _outputs_and_gradients(layer, style, generic, monkeypatch):
    import torch

    if generic:
        monkeypatch.setattr(
            keras_attn.recurrent.rnn, "loop_calls_cell_directly", lambda cell: False
        )
    x, memory = (torch.tensor(a, requires_grad=True) for a in _arrays())
    mask = torch.tensor(SEQUENCE_MASK)
    if style == "self":
        results = layer(x, mask=mask, training=True)
    else:
        results = layer(
            [x, memory],
            mask=[mask, None],
            memory_mask=torch.tensor(MEMORY_MASK),
            training=True,
        )
    rng = np.random.default_rng(2)
    loss = sum(
        (r * torch.tensor(rng.normal(size=tuple(r.shape)).astype("float32"))).sum()
        for r in results
    )
    leaves = [v.value for v in layer.trainable_variables] + [x]
    if style != "self":
        leaves.append(memory)
    grads = torch.autograd.grad(loss, leaves)
    monkeypatch.undo()
    return [r.detach().numpy() for r in results], [g.numpy() for g in grads]


@pytest.mark.parametrize("style", ["bahdanau", "luong", "self"])
@pytest.mark.parametrize(
    "layer_kwargs",
    [
        {},
        {"go_backwards": True},
        {"zero_output_for_mask": True},
        {"return_sequences": False},
        {"unroll": True},
    ],
    ids=["plain", "backwards", "zero_output", "last", "unroll"],
)
def test_own_loop_gives_the_generic_loops_outputs_and_gradients(
    style, layer_kwargs, monkeypatch
):
    fast = _outputs_and_gradients(
        _layer(style, **layer_kwargs), style, False, monkeypatch
    )
    generic = _outputs_and_gradients(
        _layer(style, **layer_kwargs), style, True, monkeypatch
    )
    for got, expected in zip(fast[0] + fast[1], generic[0] + generic[1], strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    # The masks did something: the all-masked row keeps its initial state.
    final_state = fast[0][-1]
    assert np.all(final_state[1] == 0.0)
    assert np.any(final_state[0] != 0.0)


def test_torch_takes_the_own_loop_and_calls_the_cell_once_a_step(monkeypatch):
    layer = _layer("bahdanau")
    x, memory = _arrays()
    layer([x, memory])  # built
    taken, cell_calls = [], []
    loop, cell_call = time_loop.attention_loop, layer.cell.call
    monkeypatch.setattr(
        keras_attn.recurrent.rnn,
        "attention_loop",
        lambda *a, **k: taken.append(1) or loop(*a, **k),
    )
    monkeypatch.setattr(
        layer.cell, "call", lambda *a, **k: cell_calls.append(1) or cell_call(*a, **k)
    )
    layer([x, memory], mask=[SEQUENCE_MASK, None])
    assert taken == [1]
    # Keras' torch loop runs one step more than the sequence has.
    assert len(cell_calls) == T


def test_mixed_precision_and_activity_regularizers_take_keras_loop():
    cell = AttentionCellWrapper(
        keras.layers.GRUCell(UNITS), BahdanauAttention(5), style="bahdanau"
    )
    layer = AttentionRNN(cell)
    layer(list(_arrays()))
    assert time_loop.loop_calls_cell_directly(cell)
    regularized = AttentionCellWrapper(
        keras.layers.GRUCell(UNITS),
        BahdanauAttention(5),
        style="bahdanau",
        activity_regularizer="l2",
    )
    AttentionRNN(regularized)(list(_arrays()))
    assert not time_loop.loop_calls_cell_directly(regularized)
    mixed = AttentionCellWrapper(
        keras.layers.GRUCell(UNITS, dtype="mixed_float16"),
        BahdanauAttention(5, dtype="mixed_float16"),
        style="bahdanau",
        dtype="mixed_float16",
    )
    AttentionRNN(mixed, dtype="mixed_float16")(list(_arrays()))
    assert not time_loop.loop_calls_cell_directly(mixed)


def test_a_wrapped_cells_dropout_mask_is_new_for_each_batch():
    cell = AttentionCellWrapper(
        keras.layers.GRUCell(UNITS, dropout=0.5), BahdanauAttention(5), style="bahdanau"
    )
    layer = AttentionRNN(cell)
    x, memory = _arrays()
    layer([x, memory], training=True)
    assert cell.cell._dropout_mask is None
    # A batch of another size: a mask kept from the first would not fit.
    outputs = layer([x[:2], memory[:2]], training=True)
    assert tuple(outputs.shape) == (2, T, UNITS)


def test_both_loops_read_the_same_dropout_masks_of_a_wrapped_cell(monkeypatch):
    # The masks are drawn with the initial states, before either loop, so
    # Keras' extra first step draws none: in training the two loops agree.
    def outputs(generic, training=True):
        keras.utils.set_random_seed(0)
        inner = keras.layers.GRUCell(UNITS, dropout=0.4, recurrent_dropout=0.4, seed=3)
        cell = AttentionCellWrapper(inner, BahdanauAttention(5), style="bahdanau")
        if generic:
            monkeypatch.setattr(
                keras_attn.recurrent.rnn, "loop_calls_cell_directly", lambda cell: False
            )
        results = AttentionRNN(cell)(list(_arrays()), training=training)
        monkeypatch.undo()
        return keras.ops.convert_to_numpy(results)

    own = outputs(False)
    np.testing.assert_allclose(own, outputs(True), rtol=1e-6, atol=1e-6)
    assert not np.allclose(own, outputs(False, training=False))
