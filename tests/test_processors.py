"""keras_attn.search.processors: each processor states its bans once. The `IdBan`s
list their ids, and neighbouring ones are banned in one scatter
(`apply_processors`), with the same result as one after the other; a
`TokenBan` says which ids it bans, and its `__call__` follows. Scores by
hand."""

import numpy as np
import pytest
from keras import ops

import keras_attn as ka
from keras_attn.search.processors import (
    IdBan,
    IdShift,
    TokenBan,
    apply_processors,
    ban_listed,
    shift_amounts,
)

NEG = -np.inf
# Two rows of six scores; row 0 generated [4, 2], row 1 [2] (then -1).
SCORES = np.arange(12, dtype="float32").reshape(2, 6) / 10.0
HISTORY = np.array([[4, 2, -1, -1], [2, -1, -1, -1]], dtype="int32")


def run(processors, step, scores=SCORES):
    out = apply_processors(processors, ops.convert_to_tensor(scores), HISTORY, step)
    return ops.convert_to_numpy(out)


def by_hand(banned_by_row):
    expected = SCORES.copy()
    for row, ids in enumerate(banned_by_row):
        expected[row, list(ids)] = NEG
    return expected


def test_each_processor_bans_its_ids():
    np.testing.assert_array_equal(run([ka.MinLength(3, 1)], 1), by_hand([[1], [1]]))
    # From step `min_length` on, nothing.
    np.testing.assert_array_equal(run([ka.MinLength(3, 1)], 3), SCORES)
    np.testing.assert_array_equal(
        run([ka.BannedIds([0, 5])], 0), by_hand([[0, 5], [0, 5]])
    )
    np.testing.assert_array_equal(run([ka.NoRepeatNgram(1)], 2), by_hand([[4, 2], [2]]))


def test_neighbours_in_one_scatter_equal_one_after_the_other():
    processors = [ka.MinLength(3, 2), ka.BannedIds([0, 2]), ka.NoRepeatNgram(1)]
    together = run(processors, 2)
    apart = SCORES
    for processor in processors:
        apart = run([processor], 2, apart)
    # Duplicates (2 three times in row 0) add up to -inf all the same.
    np.testing.assert_array_equal(together, by_hand([[0, 2, 4], [0, 2]]))
    np.testing.assert_array_equal(together, apart)


def test_ids_outside_the_columns_are_ignored():
    out = ban_listed(
        ops.convert_to_tensor(SCORES), [ka.BannedIds([-1, 3, 6, 40])], HISTORY, 0
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(out), by_hand([[3], [3]]))


class Listed(IdBan):
    """Lists the same ids in every step, some of them not banned."""

    def __init__(self, ids, mask):
        self.ids, self.mask = ids, mask

    def banned_ids(self, history, step, rows):
        return ops.convert_to_tensor(self.ids), ops.convert_to_tensor(self.mask)


def test_an_id_listed_twice_is_banned_if_either_bans_it():
    # Row 0 lists 3 as not banned then banned, row 1 the other way round;
    # 1 is listed twice in row 0, banned neither time.
    ids = np.array([[3, 3, 1, 1], [3, 3, 0, 0]], "int32")
    mask = np.array([[False, True, False, False], [True, False, False, False]])
    np.testing.assert_array_equal(run([Listed(ids, mask)], 0), by_hand([[3], [3]]))


def test_other_processors_keep_their_place_and_listed_bans_are_asked():
    calls = []

    class Recording(ka.MinLength):
        def banned_ids(self, history, step, rows):
            calls.append(step)
            return super().banned_ids(history, step, rows)

    class Shift(ka.LogitsProcessor):  # not a ban: order matters around it
        def __call__(self, log_probs, history, step):
            return log_probs - ops.max(log_probs, axis=1, keepdims=True)

    out = run([ka.BannedIds([5]), Shift(), Recording(3, 4)], 0)
    # Shift sees column 5 banned: row maxima 0.4 and 1.0; then 4 is banned.
    expected = SCORES - np.array([[0.4], [1.0]], dtype="float32")
    expected[:, [4, 5]] = NEG
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert calls == [0]


def test_an_empty_batch():
    empty = np.zeros((0, 6), "float32")
    out = apply_processors(
        [ka.MinLength(3, 1), ka.NoRepeatNgram(2)], empty, HISTORY[:0], 1
    )
    assert ops.convert_to_numpy(out).shape == (0, 6)


class Odd(TokenBan):
    """Bans the odd ids from step 1 on: stated once, by `banned`."""

    def banned(self, ids, history, step):
        return ops.logical_and(ids % 2 == 1, step >= 1)


def test_a_token_ban_states_its_bans_once():
    np.testing.assert_array_equal(run([Odd()], 0), SCORES)
    np.testing.assert_array_equal(run([Odd()], 1), by_hand([[1, 3, 5], [1, 3, 5]]))
    # Between two IdBans it keeps its place; all three ban.
    out = run([ka.BannedIds([0]), Odd(), ka.MinLength(3, 2)], 1)
    np.testing.assert_array_equal(out, by_hand([[0, 1, 2, 3, 5], [0, 1, 2, 3, 5]]))


def test_listed_bans_answer_for_any_ids():
    # Row 0 generated [4, 2], row 1 [2]: NoRepeatNgram(1) bans those; the
    # ids asked about are per row, one of them outside the scores' columns.
    ids = np.array([[4, 3, 2, 40], [4, 3, 2, 40]], "int32")
    said = ka.NoRepeatNgram(1).banned(ids, HISTORY, 2)
    expected = [[True, False, True, False], [False, False, True, False]]
    np.testing.assert_array_equal(ops.convert_to_numpy(said), expected)
    said = ka.BannedIds([3, 40]).banned(ids, HISTORY, 0)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(said), [[False, True, False, True]] * 2
    )
    said = ka.MinLength(3, 2).banned(ids, HISTORY, 2)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(said), [[False, False, True, False]] * 2
    )
    assert not ops.convert_to_numpy(ka.MinLength(3, 2).banned(ids, HISTORY, 3)).any()


def _expected_shifts():
    return np.array([[0, 0.5, 0, 0, 2.0, 0], [1.0, 0, 0, 0, 0, -3.0]], "float32")


def test_shift_amounts_by_hand():
    ids = np.arange(6, dtype="int32")[None]
    shifted = np.array([[1, 4], [0, 5]], "int32")
    amounts = np.array([[0.5, 2.0], [1.0, -3.0]], "float32")
    got = shift_amounts(ids, shifted, amounts, "float32")
    np.testing.assert_array_equal(ops.convert_to_numpy(got), _expected_shifts())
    # The processor's scores: those ids lowered, the rest as they were.
    scores = np.zeros((2, 6), "float32")

    class Listed(IdShift):
        def shifts(self, history, step, rows):
            return shifted, amounts

    lowered = Listed()(scores, None, 0)
    np.testing.assert_array_equal(ops.convert_to_numpy(lowered), -_expected_shifts())


@pytest.mark.tf_only
def test_shift_amounts_with_a_number_of_ids_unknown_when_traced():
    import tensorflow as tf

    ids = np.arange(6, dtype="int32")[None]
    spec = [
        tf.TensorSpec([None, None], tf.int32),
        tf.TensorSpec([None, None], tf.float32),
    ]
    traced = tf.function(
        lambda s, a: shift_amounts(ids, s, a, "float32"), input_signature=spec
    )
    shifted = np.array([[1, 4], [0, 5]], "int32")
    amounts = np.array([[0.5, 2.0], [1.0, -3.0]], "float32")
    np.testing.assert_array_equal(traced(shifted, amounts).numpy(), _expected_shifts())


def test_processors_ban_the_same_ids_both_ways():
    # What `banned` says of every column is what `__call__` bans.
    history = np.array([[4, 5, 4, -1, -1], [2, 2, -1, -1, -1]], "int32")
    width = 16
    ids = np.broadcast_to(np.arange(width, dtype="int32")[None], (2, width))
    zeros = np.zeros((2, width), "float32")
    for processor in (
        ka.MinLength(4, 1),
        ka.MaxLength(2, 1),
        ka.BannedIds([3, 13]),
        ka.NoRepeatNgram(1),
        ka.NoRepeatNgram(2),
    ):
        for step in (2, 3):
            written = np.isinf(ops.convert_to_numpy(processor(zeros, history, step)))
            said = ops.convert_to_numpy(processor.banned(ids, history, step))
            np.testing.assert_array_equal(said, written, err_msg=repr(processor))
            assert written.any() or step == 3


def test_no_repeat_ignores_followers_beyond_the_columns():
    # Token 14 was generated; scores of 12 columns have no column for it,
    # and nothing else is banned.
    history = np.array([[14, -1, -1]], "int32")
    out = ka.NoRepeatNgram(1)(np.zeros((1, 12), "float32"), history, 1)
    assert not np.isinf(ops.convert_to_numpy(out)).any()


LENGTHS = {ka.MinLength: "min_length", ka.MaxLength: "max_length"}


@pytest.mark.parametrize("processor", sorted(LENGTHS, key=lambda p: p.__name__))
@pytest.mark.parametrize(
    "length, value, received",
    [
        (True, -1, "-1"),
        (True, 2.0, "2.0"),
        (True, True, "True"),
        (True, np.array([2, 3], "int32"), r"a tensor of shape \(2,\)"),
        (True, np.array(2.0, "float32"), r"array\(2\., dtype=float32\)"),
        (False, -1, "-1"),
        (False, "2", "'2'"),
    ],
)
def test_length_processors_refuse_what_is_not_an_int_scalar(
    processor, length, value, received
):
    kwargs = {LENGTHS[processor]: 3, "end_id": 2}
    name = LENGTHS[processor] if length else "end_id"
    kwargs[name] = value
    with pytest.raises(
        ValueError,
        match=rf"^`{name}` must be an int scalar >= 0: .* Received: {name}={received}$",
    ):
        processor(**kwargs)


@pytest.mark.parametrize("value", [0, np.int64(3), np.array(3, "int32")])
def test_length_processors_take_int_scalars(value):
    # At step 3 a cut at 0 or 3 leaves only the end token (1).
    ids = ops.convert_to_tensor([[1, 2]], "int32")
    for max_length in (value, ops.convert_to_tensor(value, "int32")):
        banned = ka.MaxLength(max_length, end_id=np.int32(1)).banned(ids, HISTORY, 3)
        assert ops.convert_to_numpy(banned).tolist() == [[False, True]]
    assert ka.MinLength(value, end_id=1).min_length is value
