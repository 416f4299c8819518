"""keras_attn gives TensorFlow Addons' numbers, given TFA's weights.

The fixtures in `tests/parity/` hold random inputs, the weights given to
`tfa.seq2seq` and its outputs; `tests/parity/make_tfa_fixtures.py` wrote them
in a side environment with TFA 0.23 (see its docstring). Nothing here imports
TensorFlow Addons, nor TensorFlow on JAX and PyTorch.
"""

import os

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn import (
    AttentionCellWrapper,
    AttentionRNN,
    BahdanauAttention,
    GeneralAttention,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "parity")
ATOL = 1e-5


def _load(name):
    with np.load(os.path.join(FIXTURES, f"{name}.npz")) as data:
        return {k: data[k] for k in data.files}


def _memory_mask(f):
    # TFA's `memory_sequence_length` as a keras_attn boolean mask.
    return np.arange(f["memory"].shape[1])[None, :] < f["lengths"][:, None]


def _assign(layer, **values):
    for name, value in values.items():
        getattr(layer, name).assign(np.asarray(value, "float32"))


def _np(x):
    return ops.convert_to_numpy(x)


# ------------------------------------------------------------ mechanisms
# TFA name -> (keras_attn layer, how TFA's weights map onto it).


def _bahdanau(f):
    layer = BahdanauAttention(
        4, normalize="attention_g" in f, use_bias="attention_b" in f
    )
    weights = {
        "key_kernel": f["memory_kernel"],
        "query_kernel": f["query_kernel"],
        "score_vector": f["attention_v"],
    }
    if "attention_g" in f:
        weights.update(score_gain=f["attention_g"], bias=f["attention_b"])
    return layer, weights


def _luong(f):
    # TFA projects the keys with `memory_layer` (memory_dim, units); keras_attn
    # projects the query with `W` (query_dim, key_dim): `W` is its transpose.
    layer = GeneralAttention(use_scale="attention_g" in f)
    weights = {"kernel": f["memory_kernel"].T}
    if "attention_g" in f:
        weights["scale"] = f["attention_g"]
    return layer, weights


MECHANISMS = {
    "bahdanau": _bahdanau,  # no bias: TFA's plain score has none
    "bahdanau_normalize": _bahdanau,
    "luong": _luong,
    "luong_scale": _luong,
}


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_mechanism_matches_tfa(name):
    f = _load(name)
    layer, weights = MECHANISMS[name](f)
    layer.build([f["query"].shape, f["memory"].shape])
    _assign(layer, **weights)
    context, alignments = layer(
        [f["query"], f["memory"]],
        value_mask=_memory_mask(f),
        return_attention_scores=True,
    )
    np.testing.assert_allclose(_np(alignments), f["alignments"], atol=ATOL)
    np.testing.assert_allclose(_np(context), f["context"], atol=ATOL)
    # Padding gets exactly zero weight in both (TFA: a -inf score).
    assert np.all(_np(alignments)[1, 3:] == 0.0)


def test_prepared_memory_step_matches_tfa():
    # The decoding API (memory projected once) gives the same numbers.
    f = _load("bahdanau_normalize")
    layer, weights = _bahdanau(f)
    layer.build([f["query"].shape, f["memory"].shape])
    _assign(layer, **weights)
    memory = layer.prepare_memory(f["memory"], value_mask=_memory_mask(f))
    context, alignments = layer.step(f["query"], memory)
    np.testing.assert_allclose(_np(alignments), f["alignments"], atol=ATOL)
    np.testing.assert_allclose(_np(context), f["context"], atol=ATOL)


# ------------------------------------------------------------ AttentionWrapper
# fixture -> (mechanism, keras_attn cell arguments). TFA's wrapper is the
# Luong style: the cell steps on [input; previous attention], then attends.

WRAPPERS = {
    # attention_layer_size=5, output_attention=True, BahdanauAttention(normalize)
    "wrapper_bahdanau_output_attention": (
        _bahdanau,
        {"attention_units": 5, "attention_activation": None},
    ),
    # attention_layer_size=5, output_attention=False, LuongAttention(scale)
    "wrapper_luong_output_cell": (
        _luong,
        {"attention_units": 5, "attention_activation": None, "output_attention": False},
    ),
    # attention_layer_size=None: the attention is the context itself
    "wrapper_luong_no_layer": (_luong, {"use_attention_layer": False}),
}


@pytest.mark.parametrize("name", list(WRAPPERS))
def test_attention_wrapper_matches_tfa(name):
    f = _load(name)
    make_mechanism, options = WRAPPERS[name]
    attention, attention_weights = make_mechanism(f)
    cell = AttentionCellWrapper(
        keras.layers.LSTMCell(4),
        attention,
        style="luong",
        return_alignments=True,  # TFA's alignment_history=True
        **options,
    )
    layer = AttentionRNN(cell, return_state=True)

    def run():
        return [
            _np(t)
            for t in layer(
                [f["inputs"], f["memory"]],
                initial_state=[f["h0"], f["c0"]],  # TFA's initial_cell_state
                memory_mask=_memory_mask(f),
            )
        ]

    run()  # builds every weight
    _assign(attention, **attention_weights)
    _assign(
        cell.cell,
        kernel=f["lstm_kernel"],
        recurrent_kernel=f["lstm_recurrent_kernel"],
        bias=f["lstm_bias"],
    )
    if "attention_layer_kernel" in f:
        # TFA's attention layer reads [cell_output; context], keras_attn's W_c
        # reads [context; cell_output]: the same rows, the halves swapped.
        kernel, units = f["attention_layer_kernel"], cell.units
        _assign(cell, attention_kernel=np.concatenate([kernel[units:], kernel[:units]]))
    outputs, alignments, h, c = run()
    np.testing.assert_allclose(outputs, f["outputs"], atol=ATOL)
    np.testing.assert_allclose(alignments, f["alignment_history"], atol=ATOL)
    np.testing.assert_allclose(h, f["final_h"], atol=ATOL)
    np.testing.assert_allclose(c, f["final_c"], atol=ATOL)
    if cell.output_attention:
        np.testing.assert_allclose(outputs[:, -1], f["final_attention"], atol=ATOL)
