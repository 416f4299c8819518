"""`keras_attn.draw_candidates`: sampled candidates are `sampling_search`'s
over tiled rows, beam candidates `beam_search`'s n best; the reference comes
first, repeats and a beam's fillers are marked missing."""

import numpy as np
import pytest
from keras import ops

import keras_attn as ka

START, END, PAD = 1, 2, 0
V, T, B = 7, 5, 3


def np_(x):
    return np.asarray(ops.convert_to_numpy(x))


def make_step(scale=1.0, seed=0):
    """A bigram model plus a per-example bias held in the state `(N, V)`:
    candidates of example `b` need its own state rows."""
    table = np.random.default_rng(seed).normal(size=(V, V)).astype("float32")
    table = ops.convert_to_tensor(scale * table)

    def step(ids, state):
        logits = ops.take(table, ids, axis=0) + state
        return ops.log_softmax(logits), state

    return step


def biases(scale=3.0, seed=1):
    return np.random.default_rng(seed).normal(0, scale, (B, V)).astype("float32")


STARTS = np.full((B,), START, "int32")
BANNED = [PAD, START]


def expected_masks(ids, lengths, present=None):
    """The token mask and, repeats dropped, the candidate mask, in numpy."""
    token_mask = np.arange(T) < np.minimum(lengths + 1, T)[..., None]
    present = np.ones(ids.shape[:2], bool) if present is None else present.copy()
    for b in range(ids.shape[0]):
        for k in range(ids.shape[1]):
            for j in range(k):
                if present[b, j] and np.array_equal(ids[b, k], ids[b, j]):
                    present[b, k] = False
    return token_mask, present


def test_sampled_candidates_are_the_search_over_tiled_rows(compiled):
    step, state = make_step(), biases()

    def draw(state, starts):
        return ka.draw_candidates(
            step, state, starts, END, T, 4, temperature=1.5, seed=3, banned_ids=BANNED
        )

    def direct(state, starts):
        return ka.sampling_search(
            step,
            ka.tile_batch(state, 4),
            ops.repeat(starts, 4, axis=0),
            END,
            T,
            temperature=1.5,
            seed=3,
            banned_ids=BANNED,
        )

    got = [np_(x) for x in compiled(draw)(state, STARTS)]
    want = compiled(direct)(state, STARTS)
    ids, lengths = np_(want.ids).reshape(B, 4, T), np_(want.lengths).reshape(B, 4)
    np.testing.assert_array_equal(got[0], ids)
    np.testing.assert_array_equal(got[1], lengths)
    token_mask, present = expected_masks(ids, lengths)
    np.testing.assert_array_equal(got[2], token_mask)
    np.testing.assert_array_equal(got[3], present)
    assert len(set(map(tuple, ids.reshape(-1, T)))) > B  # the samples differ


def test_the_reference_is_candidate_zero_as_the_search_writes_it(compiled):
    references = np.array(
        [
            [3, 4, END, PAD, PAD, PAD, PAD],  # padded: END after its length
            [3, 4, 5, 6, 3, 4, END],  # longer than T: cut, no end token
            [5, PAD, PAD, PAD, PAD, PAD, PAD],  # padding without an end
        ],
        "int32",
    )

    def draw(state, starts, references):
        return ka.draw_candidates(
            make_step(), state, starts, END, T, 3, reference_ids=references, seed=0,
            banned_ids=BANNED,
        )  # fmt: skip

    ids, lengths, token_mask, present = (
        np_(x) for x in compiled(draw)(biases(), STARTS, references)
    )
    assert ids.shape == (B, 3, T)
    np.testing.assert_array_equal(
        ids[:, 0], [[3, 4, END, END, END], [3, 4, 5, 6, 3], [5, END, END, END, END]]
    )
    np.testing.assert_array_equal(lengths[:, 0], [2, 5, 1])
    np.testing.assert_array_equal(
        token_mask[:, 0].astype(int), [[1, 1, 1, 0, 0], [1] * 5, [1, 1, 0, 0, 0]]
    )
    assert present[:, 0].all()


def test_repeats_are_missing_unless_kept(compiled):
    # A peaked model whose one likely sequence is the reference.
    table = np.full((V, V), -30.0, "float32")
    table[START, 3], table[3, 4], table[4, END] = 0.0, 0.0, 0.0
    table[END, END] = 0.0

    def step(ids, state):
        return ops.log_softmax(ops.take(ops.convert_to_tensor(table), ids, 0)), state

    references = np.array([[3, 4, END], [3, 5, END], [3, 4, END]], "int32")

    def draw(starts, references):
        return [
            ka.draw_candidates(
                step,
                None,
                starts,
                END,
                T,
                4,
                reference_ids=references,
                seed=0,
                drop_duplicates=drop,
            )  # fmt: skip
            for drop in (True, False)
        ]

    dropped, kept = compiled(draw)(STARTS, references)
    np.testing.assert_array_equal(np_(dropped.ids), np_(kept.ids))
    np.testing.assert_array_equal(
        np_(dropped.candidate_mask),
        [
            [True, False, False, False],
            [True, True, False, False],
            [True, False, False, False],
        ],
    )
    assert np_(kept.candidate_mask).all()


def test_beam_candidates_are_the_n_best(compiled):
    step, state = make_step(scale=2.0), biases()

    def draw(state, starts):
        return ka.draw_candidates(
            step, state, starts, END, T, 3, method="beam", beam_size=5,
            length_penalty=0.5, banned_ids=BANNED,
        )  # fmt: skip

    def direct(state, starts):
        return ka.beam_search(
            step, state, starts, END, T, 5, length_penalty=0.5, num_hypotheses=3,
            banned_ids=BANNED,
        )  # fmt: skip

    got = [np_(x) for x in compiled(draw)(state, STARTS)]
    want = compiled(direct)(state, STARTS)
    np.testing.assert_array_equal(got[0], np_(want.ids).reshape(B, 3, T))
    np.testing.assert_array_equal(got[1], np_(want.lengths).reshape(B, 3))
    assert got[3].all()  # a beam's hypotheses differ


def test_a_beam_with_fewer_hypotheses_marks_its_fillers_missing(compiled):
    # One token, from {3, END}: two hypotheses for a beam of four.
    banned = [i for i in range(V) if i not in (3, END)]

    def draw(state, starts):
        return ka.draw_candidates(
            make_step(), state, starts, END, 1, 4, method="beam", banned_ids=banned
        )

    candidates = compiled(draw)(biases(), STARTS)
    present = np_(candidates.candidate_mask)
    np.testing.assert_array_equal(present, [[True, True, False, False]] * B)
    ids = np_(candidates.ids)[:, :2, 0]
    assert all(sorted(row) == [END, 3] for row in ids.tolist())


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(method="greedy"), r"method='greedy'"),
        (dict(num_candidates=0), r"num_candidates=0"),
        (
            dict(num_candidates=1, reference_ids=np.zeros((B, 3), "int32")),
            r">= 2 with `reference_ids`.*num_candidates=1",
        ),
        (dict(beam_size=4), r"beam_size=4 with method='sample'"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    arguments = dict(num_candidates=2)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=match):
        ka.draw_candidates(make_step(), None, STARTS, END, T, **arguments)
