"""Tests of the Recurrent Entity Network layers (`keras_attn.networks.entity_network`).

One step of each layer against numbers worked out by hand (2-d slots, weights
set by hand), the masks (padded words, padded sentences), gradients against
finite differences, and the serialization round trip; on every backend.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.networks.entity_network import (
    EntityMemoryCell,
    EntityOutput,
    PositionEncoder,
)


def _np(x):
    return np.asarray(ops.convert_to_numpy(x), dtype=np.float64)


def _set(layer, **weights):
    for name, value in weights.items():
        var = getattr(layer, name)
        var.assign(np.asarray(value, dtype=var.dtype))


# Slots h1 = [0, 1], h2 = [1, 1]; keys w1 = [1, 0], w2 = [0, 1]; s = [1, -2];
# U = I, V = 2 I, W = [[0, -3], [0, 0]] (row vectors: s W = [0, -3]); PReLU
# slope 0.5.
SLOTS = [[0.0, 1.0, 1.0, 1.0]]
SENTENCE = [[1.0, -2.0]]


def _hand_cell(**kwargs):
    cell = EntityMemoryCell(num_slots=2, units=2, **kwargs)
    cell.build((None, 2))
    _set(
        cell,
        keys=[[1, 0], [0, 1]],
        slot_kernel=np.eye(2),
        key_kernel=2 * np.eye(2),
        input_kernel=[[0, -3], [0, 0]],
        alpha=[0.5, 0.5],
    )
    return cell


def _reference_step(s, h, keys, u, v, w, alpha):
    """The cell's equations in float64 numpy, `h` `(N, d)`, `s` `(d,)`."""
    gates = 1 / (1 + np.exp(-(h @ s + keys @ s)))
    pre = h @ u + keys @ v + s @ w
    cand = np.maximum(pre, 0) + alpha * np.minimum(pre, 0)
    h = h + gates[:, None] * cand
    return h / np.linalg.norm(h, axis=-1, keepdims=True)


def test_cell_step_matches_hand_computation():
    cell = _hand_cell()
    output, [state] = cell(np.array(SENTENCE, "float32"), [np.array(SLOTS, "float32")])
    # g1 = sigmoid(s.h1 + s.w1) = sigmoid(-2 + 1) = 0.26894142
    # g2 = sigmoid(s.h2 + s.w2) = sigmoid(-1 - 2) = 0.04742587
    # pre1 = h1 U + w1 V + s W = [0, 1] + [2, 0] + [0, -3] = [2, -2] -> [2, -1]
    # pre2 = h2 U + w2 V + s W = [1, 1] + [0, 2] + [0, -3] = [1, 0]  -> [1, 0]
    # h1 = [0, 1] + g1 [2, -1] = [0.53788284, 0.73105858], norm 0.90761478
    # h2 = [1, 1] + g2 [1, 0]  = [1.04742587, 1.0],        norm 1.44813707
    expected = [[0.59263341, 0.80547231, 0.72329194, 0.69054237]]
    np.testing.assert_allclose(_np(state), expected, atol=1e-6)
    np.testing.assert_allclose(_np(output), expected, atol=1e-6)
    np.testing.assert_allclose(_np(cell.unflatten(state))[0, 1], expected[0][2:])


def test_cell_biases_match_hand_computation():
    """`use_bias`: the authors' per-slot gate bias and candidate bias."""
    cell = _hand_cell(use_bias=True)
    _set(cell, gate_bias=[1, 3], bias=[0, 1])
    assert EntityMemoryCell.from_config(cell.get_config()).use_bias is True
    output, [state] = cell(np.array(SENTENCE, "float32"), [np.array(SLOTS, "float32")])
    # g1 = sigmoid(-2 + 1 + 1) = 0.5, g2 = sigmoid(-1 - 2 + 3) = 0.5
    # pre1 = [2, -2] + [0, 1] = [2, -1] -> [2, -0.5]
    # pre2 = [1, 0] + [0, 1] = [1, 1]   -> [1, 1]
    # h1 = [0, 1] + 0.5 [2, -0.5] = [1, 0.75],  norm 1.25
    # h2 = [1, 1] + 0.5 [1, 1]    = [1.5, 1.5], norm 2.12132034
    expected = [[0.8, 0.6, 0.70710678, 0.70710678]]
    np.testing.assert_allclose(_np(state), expected, atol=1e-6)
    assert len(cell.weights) == 7
    assert len(_hand_cell().weights) == 5


def test_cell_returns_gates():
    cell = _hand_cell(return_gates=True)
    assert cell.output_size == 2 and cell.state_size == 4
    gates, [state] = cell(np.array(SENTENCE, "float32"), [np.array(SLOTS, "float32")])
    np.testing.assert_allclose(_np(gates), [[0.26894142, 0.04742587]], atol=1e-6)
    assert np.all(np.abs(np.linalg.norm(_np(state).reshape(2, 2), axis=-1) - 1) < 1e-6)


def test_initial_state_is_keys_or_zeros():
    cell = _hand_cell()
    [state] = cell.get_initial_state(batch_size=3)
    np.testing.assert_allclose(_np(state), np.tile([[1, 0, 0, 1]], (3, 1)))
    zeros = EntityMemoryCell(2, 2, initial_state="zeros")
    zeros.build((None, 2))
    np.testing.assert_allclose(_np(zeros.get_initial_state(batch_size=2)[0]), 0)


def test_rnn_masked_sentences_leave_memory_unchanged(rng):
    """A padded sentence, inside or after the story, is skipped."""
    cell = EntityMemoryCell(num_slots=3, units=4)
    rnn = keras.layers.RNN(cell)
    story = rng.normal(size=(2, 4, 4)).astype("float32")
    mask = np.array([[True, False, True, True], [True, True, False, False]])
    final = _np(rnn(story, mask=mask))
    weights = [_np(w) for w in (cell.slot_kernel, cell.key_kernel, cell.input_kernel)]
    keys, alpha = _np(cell.keys), _np(cell.alpha)
    for b in range(2):
        h = keys
        for t in np.flatnonzero(mask[b]):
            h = _reference_step(story[b, t], h, keys, *weights, alpha)
        np.testing.assert_allclose(final[b], h.reshape(-1), atol=1e-5)
    # The masked steps really were skipped: unmasked, the memory differs.
    assert np.abs(_np(rnn(story))[1] - final[1]).max() > 1e-3


def test_cell_gradient_matches_finite_differences(gradient, rng):
    cell = EntityMemoryCell(num_slots=3, units=4)
    cell.build((None, 4))
    s = rng.normal(size=(1, 4)).astype("float32")
    h = rng.normal(size=(1, 12)).astype("float32")
    probe = rng.normal(size=(1, 12))

    def loss(s, h):
        _, [new] = cell(s, [h])
        return ops.sum(new * ops.convert_to_tensor(probe, new.dtype))

    grad_s, grad_h = gradient(loss, s, h)
    weights = [_np(w) for w in (cell.slot_kernel, cell.key_kernel, cell.input_kernel)]
    keys, alpha = _np(cell.keys), _np(cell.alpha)

    def reference(s64, h64):
        new = _reference_step(s64[0], h64.reshape(3, 4), keys, *weights, alpha)
        return float(new.reshape(-1) @ probe[0])

    eps = 1e-5
    for x, grad, which in ((s, grad_s, 0), (h, grad_h, 1)):
        x64 = x.astype(np.float64)
        numeric = np.zeros_like(x64)
        for i in range(x64.shape[1]):
            up, down = x64.copy(), x64.copy()
            up[0, i] += eps
            down[0, i] -= eps
            args_up = (up, h.astype(np.float64)) if which == 0 else (s, up)
            args_down = (down, h.astype(np.float64)) if which == 0 else (s, down)
            numeric[0, i] = (reference(*args_up) - reference(*args_down)) / (2 * eps)
        np.testing.assert_allclose(grad, numeric, atol=2e-4, rtol=1e-3)


def test_position_encoder_weights_positions_and_masks_words():
    layer = PositionEncoder(max_words=3)
    # Two sentences of 3 words, 2-d embeddings; the second has one word.
    words = np.array(
        [[[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 9], [9, 9]]]], dtype="float32"
    )
    mask = np.array([[[True, True, True], [True, False, False]]])
    layer.build(words.shape)
    _set(layer, position_mask=[[1, 0], [2, 1], [0, -1]])
    out = layer(words, mask=mask)
    # [1*1 + 3*2 + 5*0, 2*0 + 4*1 + 6*(-1)] = [7, -2]; padded words add nothing.
    np.testing.assert_allclose(_np(out), [[[7, -2], [7, 0]]])
    sentence_mask = ops.convert_to_numpy(
        layer.compute_mask(words, np.array([[[True, True, True], [False] * 3]]))
    )
    np.testing.assert_array_equal(sentence_mask, [[True, False]])
    assert layer.compute_output_shape((None, 5, 3, 2)) == (None, 5, 2)


def test_output_module_matches_hand_computation():
    layer = EntityOutput(num_slots=2, output_dim=3)
    query = np.array([[1.0, 0.0]], "float32")
    memory = np.array([[1.0, 0.0, 0.0, 1.0]], "float32")  # h1 = [1, 0], h2 = [0, 1]
    layer.build([query.shape, memory.shape])
    _set(
        layer,
        hidden_kernel=-np.eye(2),
        output_kernel=[[1, 0, 2], [0, 1, 1]],
        alpha=[0.5, 0.5],
    )
    logits, p = layer([query, memory], return_attention_scores=True)
    # p = softmax([1, 0]) = [0.73105858, 0.26894142] = u;
    # q + u H = [0.26894142, -0.26894142] -> PReLU [0.26894142, -0.13447071];
    # y = that R = [0.26894142, -0.13447071, 0.53788284 - 0.13447071].
    np.testing.assert_allclose(_np(p), [[0.73105858, 0.26894142]], atol=1e-6)
    np.testing.assert_allclose(
        _np(logits), [[0.26894142, -0.13447071, 0.40341213]], atol=1e-6
    )
    # Slots given unflattened give the same answer.
    same = layer([query, memory.reshape(1, 2, 2)])
    np.testing.assert_allclose(_np(same), _np(logits), atol=1e-6)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: EntityMemoryCell(0, 4), "num_slots"),
        (lambda: EntityMemoryCell(2, 4, initial_state="ones"), "initial_state"),
        (lambda: PositionEncoder(max_words=2.5), "max_words"),
        (lambda: EntityOutput(2, output_dim=None), "output_dim"),
    ],
)
def test_invalid_arguments(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_width_mismatches_are_errors():
    with pytest.raises(ValueError, match="units=4"):
        EntityMemoryCell(2, 4).build((None, 3))
    with pytest.raises(ValueError, match="num_slots=3"):
        EntityOutput(3, 5).build([(None, 4), (None, 8)])


def _tiny_model(vocab=12, words=4, dim=6, slots=3):
    story = keras.Input((None, words), dtype="int32")
    question = keras.Input((words,), dtype="int32")
    embed = keras.layers.Embedding(vocab, dim, mask_zero=True)
    encoded = PositionEncoder(words)(embed(story))
    memory = keras.layers.RNN(EntityMemoryCell(slots, dim))(encoded)
    query = PositionEncoder(words)(embed(question))
    logits = EntityOutput(slots, vocab)([query, memory])
    return keras.Model([story, question], logits)


def test_model_serialization_round_trip(tmp_path, rng):
    model = _tiny_model()
    for layer in model.layers:
        if isinstance(layer, PositionEncoder):
            # Not the initial ones, so a mask lost on reload would show.
            layer.position_mask.assign(rng.uniform(0.5, 1.5, size=(4, 6)))
    story = rng.integers(0, 12, size=(3, 5, 4)).astype("int32")
    story[0, 3:] = 0  # a story of three sentences
    question = rng.integers(1, 12, size=(3, 4)).astype("int32")
    expected = _np(model.predict([story, question], verbose=0))
    path = tmp_path / "entnet.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(
        _np(loaded.predict([story, question], verbose=0)), expected, atol=1e-6
    )
    [rnn] = [layer for layer in loaded.layers if isinstance(layer, keras.layers.RNN)]
    assert (rnn.cell.num_slots, rnn.cell.units, rnn.cell.initial_state) == (
        3,
        6,
        "keys",
    )
    # The first story without its two padded sentences has the same answer.
    short = _np(model.predict([story[:1, :3], question[:1]], verbose=0))
    np.testing.assert_allclose(short[0], expected[0], atol=1e-5)
