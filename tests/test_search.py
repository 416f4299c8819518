"""keras_attn.search.strategies and keras_attn.search.processors, on every backend.

Beam search is checked against a brute-force enumeration of every sequence
of the toy model (tests/toy_search.py); greedy search against its argmax
path; sampling against greedy where it keeps one token.
"""

import numpy as np
import pytest
from keras import ops
from toy_search import (
    BACKEND,
    DROP_MODES,
    END,
    V,
    brute_force,
    check_extras,
    has_repeated_ngram,
    initial_state,
    make_step,
    make_tables,
    np_result,
    np_step,
    ranked_sequences,
    unpad,
)

import keras_attn as ka
from keras_attn.search.choosers import argmax_first
from keras_attn.search.strategies import DecodingResult

STARTS = [0, 2, 3, 4]
MAX_LEN = 4
# Every admissible hypothesis fits: 4**3 + 4**2 + 4 + 1 ended + 4**4 open.
EXHAUSTIVE_BEAM = 350


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"alpha": 0.8},
        {"min_length": 2, "banned": (3,), "ngram": 1, "alpha": -0.5},
        {"ngram": 2, "min_length": 1, "alpha": 1.0},
    ],
    ids=["plain", "penalty", "min_banned_unigram", "bigram"],
)
def test_exhaustive_beam_equals_brute_force(options):
    tables = make_tables(seed=3)
    alpha = options.get("alpha", 0.0)
    result = np_result(
        ka.beam_search(
            make_step(*tables),
            initial_state(STARTS),
            STARTS,
            END,
            MAX_LEN,
            EXHAUSTIVE_BEAM,
            length_penalty=alpha,
            min_length=options.get("min_length", 0),
            banned_ids=options.get("banned", ()),
            no_repeat_ngram_size=options.get("ngram", 0),
        )
    )
    for b, start in enumerate(STARTS):
        tokens, log_prob, score = brute_force(
            tables,
            start,
            MAX_LEN,
            min_length=options.get("min_length", 0),
            banned=options.get("banned", ()),
            ngram=options.get("ngram", 0),
            alpha=alpha,
        )
        assert unpad(result, b) == tokens
        np.testing.assert_allclose(result.log_probs[b], log_prob, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(result.scores[b], score, rtol=1e-5, atol=1e-5)
    check_extras(result, STARTS)


def test_exhaustive_beam_returns_the_n_best_in_order():
    """`num_hypotheses=3`: the three best sequences of the brute force, best
    first, each with its extras (rows `b * 3 + i`)."""
    tables = make_tables(seed=3)
    result = np_result(
        ka.beam_search(
            make_step(*tables),
            initial_state(STARTS),
            STARTS,
            END,
            MAX_LEN,
            EXHAUSTIVE_BEAM,
            length_penalty=1.0,
            num_hypotheses=3,
        )
    )
    assert result.ids.shape == (3 * len(STARTS), MAX_LEN)
    for b, start in enumerate(STARTS):
        ranked = ranked_sequences(tables, start, MAX_LEN, alpha=1.0)
        assert ranked[2][2] > ranked[3][2] + 1e-4  # no tie at the cut
        for i, (tokens, log_prob, score) in enumerate(ranked[:3]):
            row = b * 3 + i
            assert unpad(result, row) == tokens
            np.testing.assert_allclose(result.log_probs[row], log_prob, rtol=1e-5)
            np.testing.assert_allclose(result.scores[row], score, rtol=1e-5)
    check_extras(result, [s for s in STARTS for _ in range(3)])


def test_num_hypotheses_must_fit_the_beam():
    with pytest.raises(ValueError, match=r"num_hypotheses=4"):
        ka.beam_search(
            make_step(*make_tables(seed=3)), None, STARTS, END, MAX_LEN, 3,
            num_hypotheses=4,
        )  # fmt: skip


def greedy_path(tables, start, max_length):
    """The argmax path, in numpy."""
    bigram, by_prefix = tables
    prev2, prev1, h, tokens, total = start, start, 0, [], 0.0
    for _ in range(max_length):
        log_probs, h = np_step(bigram, by_prefix, prev2, prev1, h)
        token = int(np.argmax(log_probs))
        tokens.append(token)
        total += log_probs[token]
        if token == END:
            break
        prev2, prev1 = prev1, token
    return tokens, total


def test_greedy_equals_argmax_path():
    tables = make_tables(seed=5)
    result = np_result(
        ka.greedy_search(make_step(*tables), initial_state(STARTS), STARTS, END, 6)
    )
    assert result.ids.shape == (len(STARTS), 6)
    for b, start in enumerate(STARTS):
        tokens, total = greedy_path(tables, start, 6)
        assert unpad(result, b) == tokens
        np.testing.assert_allclose(result.log_probs[b], total, rtol=1e-5)
    np.testing.assert_array_equal(result.scores, result.log_probs)
    check_extras(result, STARTS)


@pytest.mark.parametrize("drop_finished", [False, *DROP_MODES[BACKEND]])
def test_greedy_takes_the_first_of_tied_tokens(drop_finished):
    # Row 0: tokens 2 and 3 tie, then the end; row 1: everything ties, so
    # token 0; row 2: every token banned (-inf), token 0 again (at -inf,
    # where the search's docstring says it may go on).
    table = np.log(
        np.array([[0.1, 0.1, 0.4, 0.4, 0.0], [0.2] * 5, [0.0] * 5], "float32").clip(
            1e-30
        )
    )
    table[2] = -np.inf

    def step(ids, state):
        # The dropping modes pass a row's state with it: `row` says which.
        first = ops.take(ops.convert_to_tensor(table), state["row"], axis=0)
        end_next = ops.where(ops.arange(V) == END, 0.0, -np.inf)[None]
        is_first = ops.expand_dims(state["t"] == 0, 1)
        return ops.where(is_first, first, end_next), dict(state, t=state["t"] + 1)

    result = np_result(
        ka.greedy_search(
            step,
            {"t": ops.zeros((3,), "int32"), "row": ops.arange(3, dtype="int32")},
            ops.zeros((3,), "int32"),
            END,
            3,
            drop_finished=drop_finished,
        )
    )
    np.testing.assert_array_equal(result.ids[:, 0], [2, 0, 0])
    np.testing.assert_array_equal(result.lengths[:2], [1, 1])


SEARCHES_OF_NO_ROWS = {
    "greedy": lambda step, state, starts: ka.greedy_search(step, state, starts, END, 5),
    "beam": lambda step, state, starts: ka.beam_search(step, state, starts, END, 5, 3),
    "sampling": lambda step, state, starts: ka.sampling_search(
        step, state, starts, END, 5, top_k=2, seed=1
    ),
    **{
        f"greedy-drop-{mode}": lambda step, state, starts, mode=mode: ka.greedy_search(
            step, state, starts, END, 5, drop_finished=mode
        )
        for mode in DROP_MODES[BACKEND]
    },
}


@pytest.mark.parametrize("search", list(SEARCHES_OF_NO_ROWS))
def test_a_batch_of_no_rows_decodes_to_no_rows(search):
    # A server's batch may be empty; every backend returns empty results.
    starts = ops.zeros((0,), "int32")
    result = SEARCHES_OF_NO_ROWS[search](
        make_step(*make_tables(seed=5)), initial_state(starts), starts
    )
    assert tuple(ops.shape(result.ids)) == (0, 5)
    assert tuple(ops.shape(result.lengths)) == (0,)
    assert tuple(ops.shape(result.scores)) == (0,)


def test_argmax_first_takes_the_smallest_id_of_ties():
    scores = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], "float32")
    best, index = (ops.convert_to_numpy(x) for x in argmax_first(scores))
    np.testing.assert_array_equal(best, [[3.0], [2.0]])
    np.testing.assert_array_equal(index, [1, 0])
    # With ids: the smallest id among the maxima, wherever it stands.
    ids = np.array([[5, 9, 4], [7, 6, 1]], "int32")
    _, index = argmax_first(scores, ids)
    np.testing.assert_array_equal(ops.convert_to_numpy(index), [4, 6])


@pytest.mark.parametrize("seed", [0, 5, 9])
def test_no_search_beats_the_exhaustive_beam(seed):
    # "Beam >= greedy" holds only for some inputs; what always holds is that
    # no search ends above the optimum, which the exhaustive beam finds.
    tables = make_tables(seed=seed)
    args = (initial_state(STARTS), STARTS, END, MAX_LEN)
    greedy = np_result(ka.greedy_search(make_step(*tables), *args))
    small, exhaustive = (
        np_result(ka.beam_search(make_step(*tables), *args, size))
        for size in (3, EXHAUSTIVE_BEAM)
    )
    best = exhaustive.log_probs
    for b, start in enumerate(STARTS):
        assert best[b] == pytest.approx(
            brute_force(tables, start, MAX_LEN)[1], abs=1e-4
        )
    assert np.all(greedy.log_probs <= best + 1e-5)
    assert np.all(small.log_probs <= best + 1e-5)
    check_extras(small, STARTS)


@pytest.mark.parametrize(
    "options",
    [{}, {"min_length": 3, "banned_ids": [0, 4], "no_repeat_ngram_size": 2}],
    ids=["plain", "constrained"],
)
def test_beam_size_one_equals_greedy(options):
    tables = make_tables(seed=7)
    args = (initial_state(STARTS), STARTS, END, 8)
    greedy = np_result(ka.greedy_search(make_step(*tables), *args, **options))
    beam = np_result(ka.beam_search(make_step(*tables), *args, 1, **options))
    assert beam.beam_history is None and greedy.beam_history is None
    for field in DecodingResult._fields[:-1]:
        np.testing.assert_allclose(
            getattr(beam, field), getattr(greedy, field), rtol=1e-6, err_msg=field
        )


def looping_step(vocab=6, boost=8.0, end_logit=-10.0):
    """Strongly prefers the cycle 2 -> 3 -> 2 -> ..., almost never ends."""
    logits = np.zeros((vocab, vocab), "float32")
    for a, b in [(0, 2), (2, 3), (3, 2), (4, 2), (5, 3)]:
        logits[a, b] = boost
    logits[:, END] = end_logit

    def step(ids, state):
        return ops.log_softmax(ops.take(logits, ids, axis=0), axis=-1), state

    return step


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("beam_size", [1, 4])
def test_no_repeated_ngrams(n, beam_size):
    starts = [0, 4, 5]
    # n=1 allows only 5 distinct non-end tokens: end must be allowed by then.
    min_length = 4 if n == 1 else 6
    kwargs = dict(min_length=min_length, no_repeat_ngram_size=n)
    if beam_size == 1:
        result = ka.greedy_search(looping_step(), None, starts, END, 9, **kwargs)
    else:
        result = ka.beam_search(looping_step(), None, starts, END, 9, 4, **kwargs)
    result = np_result(result)
    assert result.extras is None
    for b in range(len(starts)):
        tokens = unpad(result, b)
        assert not has_repeated_ngram(tokens, n), tokens
        assert result.lengths[b] >= min_length
        assert np.isfinite(result.log_probs[b])
    # Without blocking the cycle repeats.
    free = np_result(ka.greedy_search(looping_step(), None, starts, END, 9))
    assert unpad(free, 0) == [2, 3] * 4 + [2]


def test_unigram_blocking_is_a_permutation():
    # A pointer network's tour: 5 positions, each exactly once, then the end.
    step = looping_step()
    result = np_result(
        ka.greedy_search(step, None, [0], END, 6, min_length=5, no_repeat_ngram_size=1)
    )
    tokens = unpad(result, 0)
    assert sorted(tokens[:5]) == [0, 2, 3, 4, 5] and tokens[5] == END


@pytest.mark.parametrize("beam_size", [1, 3])
def test_min_length_and_banned_ids(beam_size):
    # End is by far the likeliest token, and 2 the likeliest after it.
    logits = np.zeros((V, V), "float32")
    logits[:, END] = 10.0
    logits[:, 2] = 5.0

    def step(ids, state):
        return ops.log_softmax(ops.take(logits, ids, axis=0), axis=-1), state

    kwargs = dict(min_length=3, banned_ids=[2, 0])
    args = (step, None, [0, 3], END, 7)
    if beam_size == 1:
        result = ka.greedy_search(*args, **kwargs)
    else:
        result = ka.beam_search(*args, beam_size, **kwargs)
    result = np_result(result)
    np.testing.assert_array_equal(result.lengths, [3, 3])
    ids = result.ids
    assert np.all(ids[:, 3:] == END)
    assert not np.any(np.isin(ids[:, :3], [END, 0, 2]))
    # Bans do not renormalise: three tokens at logit 0, then the end at 10,
    # each against logsumexp([0, 10, 5, 0, 0]).
    lse = np.log(np.exp(10.0) + np.exp(5.0) + 3.0)
    expected = 10.0 - 4 * lse
    np.testing.assert_allclose(result.log_probs, [expected] * 2, rtol=1e-5)


def test_max_length_cuts_open_hypotheses():
    def step(ids, state):
        log_probs = ops.log_softmax(ops.one_hot(ops.full_like(ids, 3), V) * 9.0)
        return log_probs, state, ops.ones((ops.shape(ids)[0], 2))

    for beam_size in (1, 2):
        args = (step, (), [0, 0], END, 5)
        if beam_size == 1:
            result = np_result(ka.greedy_search(*args))
        else:
            result = np_result(ka.beam_search(*args, beam_size))
        np.testing.assert_array_equal(result.ids, np.full((2, 5), 3))
        np.testing.assert_array_equal(result.lengths, [5, 5])
        np.testing.assert_array_equal(result.extras, np.ones((2, 5, 2)))


@pytest.mark.parametrize("beam_size", [1, 2])
def test_max_length_processor_forces_the_end_token(beam_size):
    # Token 3 is the likeliest at every step; the end token is never chosen
    # unless forced.
    def step(ids, state):
        return ops.log_softmax(ops.one_hot(ops.full_like(ids, 3), V) * 9.0), state

    def search(max_length, min_length=0):
        processors = [ka.MaxLength(ops.convert_to_tensor(max_length), END)]
        args = (step, None, [0, 0], END, 5)
        kwargs = dict(min_length=min_length, processors=processors)
        if beam_size == 1:
            return np_result(ka.greedy_search(*args, **kwargs))
        return np_result(ka.beam_search(*args, beam_size, **kwargs))

    result = search(2)
    np.testing.assert_array_equal(result.lengths, [2, 2])
    np.testing.assert_array_equal(result.ids, [[3, 3, END, END, END]] * 2)
    # Two tokens at logit 9, then the forced end at logit 0.
    lse = np.log(np.exp(9.0) + 4.0)
    np.testing.assert_allclose(result.log_probs, [18.0 - 3 * lse] * 2, rtol=1e-6)
    # A maximum at the buffer's length or above cuts nothing.
    np.testing.assert_array_equal(search(5).lengths, [5, 5])
    np.testing.assert_array_equal(search(9).ids, np.full((2, 5), 3))
    # Zero: only the end token; a minimum as long as the maximum still ends.
    np.testing.assert_array_equal(search(0).lengths, [0, 0])
    np.testing.assert_array_equal(search(1, min_length=1).lengths, [1, 1])


def test_custom_processor():
    class OddOnly(ka.LogitsProcessor):
        def __call__(self, log_probs, history, step):
            even = ops.arange(ops.shape(log_probs)[1]) % 2 == 0
            return self.ban(log_probs, even[None])

    tables = make_tables(seed=2)
    result = np_result(
        ka.beam_search(
            make_step(*tables),
            initial_state(STARTS),
            STARTS,
            END,
            4,
            3,
            processors=[OddOnly()],
        )
    )
    assert np.all(result.ids % 2 == 1)


# Scores by step, not by token: END (1) leads at step 0 by 0.2 and at step 1
# by 0.9 over token 3, at step 2 by 2.8.
_BY_STEP = np.array(
    [
        [-9.0, -0.3, -0.5, -2.0],
        [-9.0, -0.1, -3.0, -1.0],
        [-9.0, -0.2, -3.0, -3.0],
    ],
    "float32",
)


@pytest.mark.parametrize(
    "penalty, ids, length, log_prob",
    [
        (0.0, [END, END, END], 0, -0.3),
        # Step 0: END -0.8 < token 2's -0.5; step 1: END -0.6 > token 3's -1.0.
        (0.5, [2, END, END], 1, -0.5 - 0.6),
        # Step 1: END -1.1 < -1.0; step 2: END -1.2, the rest -3.0.
        (1.0, [2, 3, END], 2, -0.5 - 1.0 - 1.2),
    ],
)
def test_end_penalty_lengthens_greedy_as_worked_out_by_hand(
    penalty, ids, length, log_prob
):
    def step(tokens, t):
        return ops.take(ops.convert_to_tensor(_BY_STEP), t, axis=0), t + 1

    t0 = np.zeros(2, "int32")
    result = np_result(
        ka.greedy_search(
            step,
            t0,
            t0,
            END,
            3,
            processors=[ka.EndPenalty(penalty, END)],
            check_log_probs=False,  # scores by hand, not a distribution
        )
    )
    np.testing.assert_array_equal(result.ids, [ids, ids])
    np.testing.assert_array_equal(result.lengths, [length, length])
    # The scores include the penalty, paid once, by the end token.
    np.testing.assert_allclose(result.log_probs, [log_prob, log_prob], rtol=1e-6)


def test_tile_batch():
    tiled = ka.tile_batch({"a": np.array([[1, 2], [3, 4]])}, 3)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(tiled["a"]), [[1, 2]] * 3 + [[3, 4]] * 3
    )


def test_argument_errors():
    step = looping_step()
    with pytest.raises(ValueError, match="beam_size"):
        ka.beam_search(step, None, [0], END, 4, 0)
    with pytest.raises(ValueError, match="max_length"):
        ka.greedy_search(step, None, [0], END, 0)
    with pytest.raises(ValueError, match="Received: n=0"):
        ka.NoRepeatNgram(0)


# ------------------------------------------------------------------ sampling


def sample(tables, **kwargs):
    return np_result(
        ka.sampling_search(
            make_step(*tables), initial_state(STARTS), STARTS, END, 6, **kwargs
        )
    )


@pytest.mark.parametrize(
    "kwargs", [{"top_k": 1}, {"top_p": 1e-4}, {"temperature": 1e-3}]
)
def test_sampling_that_keeps_one_token_is_greedy(kwargs):
    tables = make_tables(seed=5)
    greedy = np_result(
        ka.greedy_search(make_step(*tables), initial_state(STARTS), STARTS, END, 6)
    )
    sampled = sample(tables, seed=3, **kwargs)
    assert sampled.beam_history is None and greedy.beam_history is None
    for field in DecodingResult._fields[:-1]:
        np.testing.assert_allclose(
            getattr(sampled, field), getattr(greedy, field), rtol=1e-5, err_msg=field
        )


def test_sampling_is_reproducible_and_varies_with_the_seed():
    tables = make_tables(seed=4, vocab=7)
    first = sample(tables, seed=11, temperature=1.5)
    np.testing.assert_array_equal(
        first.ids, sample(tables, seed=11, temperature=1.5).ids
    )
    others = [sample(tables, seed=s, temperature=1.5).ids for s in range(12, 16)]
    assert any(not np.array_equal(first.ids, o) for o in others)
    check_extras(first, STARTS)
