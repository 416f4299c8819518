"""keras_attn gives TensorFlow Addons' numbers, given TFA's weights.

The fixtures in `tests/parity/` hold random inputs, the weights given to
`tfa.seq2seq` and its outputs; `tests/parity/make_tfa_fixtures.py` wrote them
in a side environment with TFA 0.23 (see its docstring). Nothing here imports
TensorFlow Addons, nor TensorFlow on JAX and PyTorch.

Covered: `BahdanauAttention` (plain and `normalize=True` with a non-default
gain and bias), `LuongAttention` (plain and `scale=True`), `AttentionWrapper`
over an `LSTMCell` (`attention_layer_size`, `output_attention` True and
False, `alignment_history=True`, `initial_cell_state`) and
`BeamSearchDecoder(length_penalty_weight)` against `keras_attn.beam_search`.
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
    beam_search,
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


# ------------------------------------------------------------ BeamSearchDecoder
# A bigram model: log P(next | last) = table[last]. TFA ran it as a cell whose
# output is its input (one-hot ids) under a Dense layer whose kernel is the
# table.


def _beam(f):
    table = ops.convert_to_tensor(f["table"])

    def step(ids, state):
        return ops.take(table, ids, axis=0), state

    return beam_search(
        step,
        None,
        f["start_ids"],
        end_id=int(f["end_id"]),
        max_length=int(f["max_length"]),
        beam_size=int(f["beam_width"]),
        length_penalty=float(f["length_penalty"]),
    )


def _np_score(f, row, ids, length):
    """GNMT score of one hypothesis, from the table in numpy.

    `ids[:length]` then, if it ended before `max_length`, the end token.
    """
    tokens = list(ids[:length])
    if length < int(f["max_length"]):
        tokens.append(int(f["end_id"]))
    previous = [int(f["start_ids"][row]), *tokens[:-1]]
    log_prob = sum(f["table"][p, t] for p, t in zip(previous, tokens, strict=True))
    return log_prob / ((5 + len(tokens)) / 6) ** float(f["length_penalty"])


@pytest.mark.parametrize("name", ["beam_no_early_end", "beam_with_end"])
def test_beam_search_matches_tfa(name):
    f = _load(name)
    result = _beam(f)
    # TFA's beams come sorted: beam 0 is the best, keras_attn's only result.
    tfa_ids = f["predicted_ids"][:, :, 0]
    steps = tfa_ids.shape[1]
    ids = _np(result.ids)
    np.testing.assert_array_equal(ids[:, :steps], tfa_ids)
    assert np.all(ids[:, steps:] == f["end_id"])
    # TFA counts the end token in `lengths`; keras_attn does not.
    np.testing.assert_array_equal(
        _np(result.lengths), f["lengths"][:, 0] - f["finished"][:, 0]
    )
    np.testing.assert_allclose(_np(result.log_probs), f["log_probs"][:, 0], atol=ATOL)
    np.testing.assert_allclose(
        _np(result.scores), f["step_scores"][:, -1, 0], atol=ATOL
    )
    if name == "beam_with_end":
        # Ended and cut-off hypotheses competed: lengths differ in the beam.
        assert f["finished"].any() and not f["finished"].all()


def test_beam_search_keeps_an_ending_hypothesis_tfa_drops():
    """The one way the two beams differ, and why keras_attn's is defensible.

    Both keep ended hypotheses in the beam and rank by GNMT's
    `log P / ((5 + n) / 6) ** alpha` with the end token counted in `n`, except
    that TFA, at the very step a hypothesis ends, scores it without its end
    token (`lengths_to_add` is 0 for `end_token`) and counts it afterwards.
    With `alpha > 0` that makes an ending hypothesis look worse for one step,
    and one near the edge of the beam is dropped for good. In this fixture
    that loses TFA the best hypothesis of the second example.
    """
    f = _load("beam_tfa_drops_end")
    result = _beam(f)
    ids, lengths, scores = (_np(t) for t in result[:3])
    tfa_ids = f["predicted_ids"][:, :, 0]
    tfa_lengths = f["lengths"][:, 0] - f["finished"][:, 0]
    tfa_scores = f["step_scores"][:, -1, 0]
    for row in range(2):
        # Both final scores are the same formula, recomputed here.
        np.testing.assert_allclose(
            scores[row], _np_score(f, row, ids[row], lengths[row]), atol=ATOL
        )
        np.testing.assert_allclose(
            tfa_scores[row],
            _np_score(f, row, tfa_ids[row], tfa_lengths[row]),
            atol=ATOL,
        )
    np.testing.assert_array_equal(ids[0, : tfa_ids.shape[1]], tfa_ids[0])
    # keras_attn's hypothesis for the second example ends after one token;
    # it scores better than TFA's (-1.89 against -2.60).
    assert lengths[1] == 1 and tfa_lengths[1] == 3
    assert scores[1] > tfa_scores[1] + 0.5
