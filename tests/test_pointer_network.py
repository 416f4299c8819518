"""The Pointer Network layer: hand-computed steps, masks, training, saving."""

import itertools
import json

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka

NEG_INF = -np.inf


def to_np(x):
    return np.asarray(ops.convert_to_numpy(x), dtype=np.float64)


def assert_log_probs(got, expected, atol=1e-6):
    """Equal, `-inf` exactly where expected."""
    got, expected = to_np(got), np.asarray(expected, np.float64)
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], atol=atol)


# ------------------------------------------------------------ pointer_network_log_probs


def dot_memory(value_mask=None):
    """Dot score over END (0, 0) and three points, units = 2."""
    attention = ka.DotAttention()
    attention.build([(None, None, 2), (None, None, 2)])
    values = np.array([[[0, 0], [1, 0], [0, 1], [2, 0]]], "float32")
    return attention, attention.prepare_memory(values, value_mask=value_mask)


def test_pointer_log_probs_by_hand():
    attention, memory = dot_memory()
    query = np.array([[1.0, 0.0]], "float32")
    # Scores q.k = [0, 1, 0, 2]; log(1 + e + 1 + e^2) = log(12.10734) = 2.493812.
    expected = np.array([[-2.493812, -1.493812, -2.493812, -0.493812]])
    assert_log_probs(ka.pointer_network_log_probs(attention, query, memory), expected)
    # A rank-3 query gives one row per query step.
    got = ka.pointer_network_log_probs(attention, query[:, None], memory)
    assert tuple(got.shape) == (1, 1, 4)
    assert_log_probs(got[:, 0], expected)


def test_pointer_log_probs_masks():
    # Padding at position 3: log(1 + e + 1) = log(4.718282) = 1.551445.
    attention, memory = dot_memory(value_mask=np.array([[1, 1, 1, 0]], bool))
    query = np.array([[1.0, 0.0]], "float32")
    assert_log_probs(
        ka.pointer_network_log_probs(attention, query, memory),
        [[-1.551445, -0.551445, -1.551445, NEG_INF]],
    )
    # Position 1 already chosen, on top of the padding: log(1 + 1) = 0.693147.
    chosen = np.array([[1, 0, 1, 1]], bool)
    assert_log_probs(
        ka.pointer_network_log_probs(attention, query, memory, mask=chosen),
        [[-0.693147, NEG_INF, -0.693147, NEG_INF]],
    )


# ------------------------------------------------------------ the layer by hand


def saturated_lstm(lstm):
    """Gates fixed at i = o = 1, f = 0 and candidate tanh(x): h_t = tanh(tanh(x_t)).

    The recurrent kernel is zero and the forget gate closed, so a step ignores
    the state it starts from.
    """
    units = lstm.cell.units
    kernel = np.zeros((units, 4 * units), "float32")
    kernel[:, 2 * units : 3 * units] = np.eye(units)
    bias = np.concatenate(
        [
            np.full(units, 30.0),
            np.full(units, -30.0),
            np.zeros(units),
            np.full(units, 30.0),
        ]
    ).astype("float32")
    lstm.cell.kernel.assign(kernel)
    lstm.cell.recurrent_kernel.assign(np.zeros((units, 4 * units), "float32"))
    lstm.cell.bias.assign(bias)


def hand_layer():
    """Dot score, units = input_dim = 2; every LSTM output is tanh(tanh(x))."""
    layer = ka.PointerNetwork(2, attention=ka.DotAttention(), mask_chosen=True)
    layer.build([(None, None, 2), (None, None)])
    saturated_lstm(layer.encoder)
    saturated_lstm(layer.decoder)
    # Inputs are arctanh(arctanh(y)), so the LSTMs output exactly y.
    layer.start_vector.assign(np.arctanh(np.arctanh([0.6, 0.2])).astype("float32"))
    layer.end_vector.assign(np.zeros(2, "float32"))
    encoded = np.array([[[0.5, 0.0], [0.0, 0.5], [0.25, 0.25]]] * 2)
    points = np.arctanh(np.arctanh(encoded)).astype("float32")
    return layer, points


# Step 0: query (0.6, 0.2) against END (0, 0), e_1 (0.5, 0), e_2 (0, 0.5),
# e_3 (0.25, 0.25): scores [0, 0.3, 0.1, 0.2],
# log(1 + e^0.3 + e^0.1 + e^0.2) = log(4.676433) = 1.542536.
STEP0 = [-1.542536, -1.242536, -1.442536, -1.342536]
# Without e_3 (padding): log(1 + e^0.3 + e^0.1) = log(3.455030) = 1.239831.
STEP0_PADDED = [-1.239831, -0.939831, -1.139831, NEG_INF]
# Step 1 after choosing position 1: the query is e_1 = (0.5, 0): scores
# [0, 0.25, 0, 0.125], position 1 masked: log(1 + 1 + e^0.125) = 1.142038.
STEP1 = [-1.142038, NEG_INF, -1.142038, -1.017038]
STEP1_PADDED = [-0.693147, NEG_INF, -0.693147, NEG_INF]  # log 2


def test_teacher_forced_call_by_hand():
    layer, points = hand_layer()
    targets = np.array([[1, 3, 2, 0], [1, 2, 0, -1]], "int32")
    mask = np.array([[1, 1, 1], [1, 1, 0]], bool)
    log_probs = layer([points, targets], points_mask=mask)
    assert tuple(log_probs.shape) == (2, 4, 4)
    assert_log_probs(log_probs[:, :2], [[STEP0, STEP1], [STEP0_PADDED, STEP1_PADDED]])


def test_decoding_steps_by_hand():
    layer, points = hand_layer()
    mask = np.array([[1, 1, 1], [1, 1, 0]], bool)
    state = layer.initial_state(points, mask)
    log_probs, state = layer.step(np.array([0, 0], "int32"), state)
    assert_log_probs(log_probs, [STEP0, STEP0_PADDED])
    log_probs, state = layer.step(np.array([1, 1], "int32"), state)
    assert_log_probs(log_probs, [STEP1, STEP1_PADDED])
    np.testing.assert_array_equal(to_np(state["chosen"]), [[0, 1, 0, 0], [0, 1, 0, 0]])


def test_without_mask_chosen_a_position_can_repeat():
    layer, points = hand_layer()
    layer.mask_chosen = False
    log_probs = layer([points[:1], np.array([[1, 0]], "int32")])
    # Step 1 as STEP1, position 1 allowed: log(2 + e^0.25 + e^0.125) = 1.485500.
    assert_log_probs(log_probs[0, 1], [-1.485500, -1.235500, -1.485500, -1.360500])


# ------------------------------------------------------------ random weights


def random_problem(rng, batch=3, n=5, input_dim=2):
    points = rng.uniform(size=(batch, n, input_dim)).astype("float32")
    lengths = np.array([n, n - 2, n - 1])[:batch]
    mask = np.arange(n)[None, :] < lengths[:, None]
    targets = np.full((batch, n + 1), -1, "int32")
    for b, length in enumerate(lengths):
        targets[b, :length] = rng.permutation(length) + 1
        targets[b, length] = ka.networks.pointer_network.END
    return points, mask, targets


@pytest.mark.specs("dot", "general", "bahdanau", "network")
@pytest.mark.parametrize("mask_chosen", [False, True])
def test_steps_match_the_teacher_forced_call(spec, ref, rng, mask_chosen):
    units = 6
    layer = ka.PointerNetwork(
        units, attention=spec.make(units, units), mask_chosen=mask_chosen
    )
    points, mask, targets = random_problem(rng)
    layer([points, targets], points_mask=mask)  # Builds the score layer.
    ref.randomize_weights(layer.attention, rng)
    expected = to_np(layer([points, targets], points_mask=mask))
    # Every row is a distribution over the unmasked positions.
    np.testing.assert_allclose(np.exp(expected).sum(-1), 1.0, rtol=1e-5)
    state = layer.initial_state(points, mask)
    ids = np.zeros(len(points), "int32")
    for t in range(targets.shape[1]):
        log_probs, state = layer.step(ids, state)
        assert_log_probs(log_probs, expected[:, t], atol=1e-5)
        ids = np.maximum(targets[:, t], 0)


def test_padding_changes_nothing(rng):
    """A padded example scores as it does alone; padding is never pointed at."""
    layer = ka.PointerNetwork(5, mask_chosen=True)
    points, mask, targets = random_problem(rng)
    # Garbage in the padding must not leak.
    points[~mask] = 100.0
    batched = to_np(layer([points, targets], points_mask=mask))
    n = mask[1].sum()
    alone = to_np(layer([points[1:2, :n], targets[1:2, : n + 1]]))
    np.testing.assert_allclose(batched[1, : n + 1, : n + 1], alone[0], atol=1e-5)
    assert np.all(np.isneginf(batched[1][:, n + 1 :]))


def test_chosen_positions_are_masked_in_training(rng):
    layer = ka.PointerNetwork(4, mask_chosen=True)
    points, mask, targets = random_problem(rng, batch=1)
    log_probs = to_np(layer([points, targets], points_mask=mask))[0]
    for t in range(targets.shape[1]):
        banned = set(targets[0, :t].tolist()) - {0}
        assert set(np.flatnonzero(np.isneginf(log_probs[t]))) == banned
    # END is never banned; at the last step it is the only position left.
    np.testing.assert_allclose(log_probs[-1, 0], 0.0, atol=1e-6)


def test_training_reduces_the_loss(rng):
    layer = ka.PointerNetwork(8, mask_chosen=True)
    points, mask, targets = random_problem(rng)
    model_in = [keras.Input((None, 2)), keras.Input((None,), dtype="int32")]
    model = keras.Model(model_in, layer(model_in))
    model.compile(
        optimizer=keras.optimizers.Adam(0.05),
        loss=lambda y, p: ka.pointer_network_nll(p, y),
    )
    # No mask input here: every row's 5 points are real, and the shorter
    # rows' targets are simply shorter sequences.
    history = model.fit([points, targets], targets, epochs=30, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.5 * losses[0]


# ------------------------------------------------------------ decoding


def test_greedy_decoding_by_hand():
    layer, points = hand_layer()
    layer.mask_chosen = False
    # Step 0 picks 1 (STEP0); then the query is e_1 = (0.5, 0), whose scores
    # [0, 0.25, 0, 0.125] pick 1 again, and again: no constraint, no END.
    free = layer.decode(points[:1], permutation=False)
    np.testing.assert_array_equal(to_np(free.ids), [[1, 1, 1, 1]])
    assert to_np(free.lengths)[0] == 4
    # Permutations only (the layer masks chosen positions too, so its
    # log-probabilities are those of the constrained choice): then 3
    # (0.125 > 0: STEP1), then the query e_3 = (0.25, 0.25) scores
    # [0, -, 0.125, -]: 2, then END. The padded row has 2 points: after 1,
    # END and 2 both score 0, but END is banned until both are chosen.
    layer.mask_chosen = True
    mask = np.array([[1, 1, 1], [1, 1, 0]], bool)
    result = layer.decode(points, mask)
    np.testing.assert_array_equal(to_np(result.ids), [[1, 3, 2, 0], [1, 2, 0, 0]])
    np.testing.assert_array_equal(to_np(result.lengths), [3, 2])
    # STEP0[1] + STEP1[3] + (0.125 - log(1 + e^0.125)) + log 1 (END alone)
    #   = -1.242536 - 1.017038 - 0.632599 = -2.892173.
    np.testing.assert_allclose(to_np(result.log_probs)[0], -2.892173, atol=1e-5)


def test_end_after_all_bans_end_until_every_point_is_chosen():
    processor = ka.networks.pointer_network.EndAfterAll(np.array([1, 2], "int32"))
    log_probs = np.full((2, 3), -1.0, "float32")
    history = np.array([[2, -1, -1], [1, -1, -1]], "int32")
    # Step 1: row 0 (one point) chose it and may end; row 1 (two) may not.
    got = to_np(processor(log_probs, history, np.int32(1)))
    np.testing.assert_array_equal(got, [[-1, -1, -1], [NEG_INF, -1, -1]])
    got = to_np(processor(log_probs, history, np.int32(2)))
    np.testing.assert_array_equal(got, log_probs)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_permutation_decoding_gives_permutations(rng, beam_size):
    layer = ka.PointerNetwork(6)
    points, mask, _ = random_problem(rng, n=6)
    result = layer.decode(points, mask, beam_size=beam_size, permutation=True)
    ids, lengths = to_np(result.ids).astype(int), to_np(result.lengths)
    for row, count, length in zip(ids, mask.sum(1), lengths, strict=True):
        assert length == count
        assert sorted(row[:count]) == list(range(1, count + 1))
        assert np.all(row[count:] == 0)


def test_exhaustive_beam_finds_the_most_probable_permutation(rng):
    layer = ka.PointerNetwork(6, mask_chosen=True)
    points = rng.uniform(size=(2, 3, 2)).astype("float32")
    perms = np.array(list(itertools.permutations([1, 2, 3])), "int32")
    targets = np.concatenate([perms, np.zeros((6, 1), "int32")], axis=1)
    best = []
    for example in points:
        log_probs = to_np(layer([np.repeat(example[None], 6, 0), targets]))
        total = np.take_along_axis(log_probs, targets[..., None], -1).sum((1, 2))
        best.append((targets[np.argmax(total)], total.max()))
    # 6 beams hold every partial permutation of 3 points.
    result = layer.decode(points, beam_size=6)
    for (target, total), ids, log_p in zip(
        best, to_np(result.ids), to_np(result.log_probs), strict=True
    ):
        np.testing.assert_array_equal(ids, target)
        np.testing.assert_allclose(log_p, total, atol=1e-5)


# ------------------------------------------------------------ the loss


def test_nll_by_hand():
    log_probs = np.log(
        np.array(
            [
                [[0.5, 0.25, 0.25], [1.0, 1e-9, 1e-9]],
                [[0.1, 0.9, 1e-9], [0.5, 0.5, 1e-9]],
            ]
        )
    ).astype("float32")
    targets = np.array([[1, 0], [1, -1]], "int32")
    # -log 0.25, -log 1, -log 0.9; the padded step counts for nothing.
    per_step = [[1.386294, 0.0], [0.105361, 0.0]]
    np.testing.assert_allclose(
        to_np(ka.pointer_network_nll(log_probs, targets, reduction="none")),
        per_step,
        atol=1e-6,
    )
    np.testing.assert_allclose(
        to_np(ka.pointer_network_nll(log_probs, targets, reduction="sum")),
        1.491655,
        atol=1e-6,
    )
    np.testing.assert_allclose(
        to_np(ka.pointer_network_nll(log_probs, targets)), 1.491655 / 3, atol=1e-6
    )


def test_nll_ignores_minus_inf_at_padding():
    log_probs = np.array([[[0.0, NEG_INF], [0.0, NEG_INF]]], "float32")
    targets = np.array([[0, -1]], "int32")
    assert to_np(ka.pointer_network_nll(log_probs, targets)) == 0.0


# ------------------------------------------------------------ errors


def test_errors():
    with pytest.raises(ValueError, match="`units` must be a positive integer"):
        ka.PointerNetwork(0)
    with pytest.raises(ValueError, match="`attention` must be a keras_attn"):
        ka.PointerNetwork(4, attention=keras.layers.Dense(3))
    with pytest.raises(ValueError, match="`reduction` must be one of"):
        ka.pointer_network_nll(np.zeros((1, 1, 2)), np.zeros((1, 1)), "max")
    layer = ka.PointerNetwork(4)
    with pytest.raises(ValueError, match="called on a list"):
        layer(np.zeros((1, 3, 2), "float32"))
    with pytest.raises(ValueError, match="targets must have shape"):
        layer([np.zeros((1, 3, 2), "float32"), np.zeros((1,), "int32")])


# ------------------------------------------------------------ saving


def test_config_round_trip():
    layer = ka.PointerNetwork(
        7, attention=ka.GeneralAttention(), mask_chosen=True, name="ptr"
    )
    config = json.loads(json.dumps(layer.get_config()))
    restored = ka.PointerNetwork.from_config(config)
    assert isinstance(restored.attention, ka.GeneralAttention)
    assert restored.units == 7 and restored.mask_chosen
    assert json.loads(json.dumps(restored.get_config())) == config


def test_save_and_load(rng, tmp_path):
    points, mask, targets = random_problem(rng)
    inputs = [keras.Input((None, 2)), keras.Input((None,), dtype="int32")]
    layer = ka.PointerNetwork(
        6, attention=ka.BahdanauAttention(4, normalize=True), name="ptr"
    )
    model = keras.Model(inputs, layer(inputs))
    for var in layer.weights:
        var.assign(rng.normal(scale=0.3, size=tuple(var.shape)).astype("float32"))
    expected = to_np(model([points, targets]))

    path = tmp_path / "ptr.keras"
    model.save(path)
    restored = keras.saving.load_model(path, compile=False)  # No custom_objects.
    loaded = restored.get_layer("ptr")
    assert isinstance(loaded, ka.PointerNetwork)
    np.testing.assert_array_equal(to_np(restored([points, targets])), expected)
    state = loaded.initial_state(points)
    log_probs, _ = loaded.step(np.zeros(len(points), "int32"), state)
    np.testing.assert_allclose(to_np(log_probs), expected[:, 0], atol=1e-6)
