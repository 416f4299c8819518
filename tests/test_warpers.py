"""keras_attn.search.warpers: temperature, top-k and top-p as processors that shape
what sampling draws from, composed with the constraints in one list; the
scores stay the constrained log-probabilities. Numbers by hand."""

import numpy as np
import pytest
from keras import ops

import keras_attn as ka

NEG = -np.inf
END = 1
# One step from a fixed distribution over 4 tokens.
PROBS = np.array([0.5, 0.25, 0.15, 0.1], "float32")


def warp(warper, scores):
    history = np.full((len(scores), 2), -1, "int32")
    out = warper(ops.convert_to_tensor(np.array(scores, "float32")), history, 0)
    return ops.convert_to_numpy(out)


def test_temperature_divides():
    np.testing.assert_allclose(
        warp(ka.Temperature(2.0), [[-1.0, -2.0, -4.0]]), [[-0.5, -1.0, -2.0]]
    )


def test_top_k_keeps_the_k_highest_and_their_ties():
    np.testing.assert_array_equal(
        warp(ka.TopK(2), [[3.0, 1.0, 2.0, 0.0], [3.0, 1.0, 2.0, 2.0]]),
        [[3.0, NEG, 2.0, NEG], [3.0, NEG, 2.0, 2.0]],
    )


def test_top_p_keeps_the_smallest_set_that_reaches_p():
    log_probs = np.log(PROBS)[None]
    # 0.5 < 0.7: a second token; 0.75 >= 0.7: no third.
    np.testing.assert_allclose(
        warp(ka.TopP(0.7), log_probs), [[np.log(0.5), np.log(0.25), NEG, NEG]]
    )
    # 0.5 reaches 0.5: the most probable token alone.
    np.testing.assert_allclose(
        warp(ka.TopP(0.5), log_probs), [[np.log(0.5), NEG, NEG, NEG]]
    )
    np.testing.assert_allclose(warp(ka.TopP(1.0), log_probs), log_probs)


def fixed_step(ids, state):
    log_probs = ops.log(ops.convert_to_tensor(PROBS))
    return ops.broadcast_to(log_probs, (ops.shape(ids)[0], 4)), state


STARTS = np.zeros(2000, "int32")


def first_tokens(**kwargs):
    out = ka.sampling_search(fixed_step, None, STARTS, END, 1, seed=0, **kwargs)
    ids = ops.convert_to_numpy(out.ids)[:, 0]
    return ids, ops.convert_to_numpy(out.log_probs)


def test_sampling_frequencies_follow_top_k_and_top_p():
    frequencies = [
        np.bincount(first_tokens(**kwargs)[0], minlength=4) / len(STARTS)
        for kwargs in ({}, {"top_k": 2}, {"top_p": 0.7})
    ]
    np.testing.assert_allclose(frequencies[0], PROBS, atol=0.03)
    np.testing.assert_allclose(frequencies[1], [2 / 3, 1 / 3, 0, 0], atol=0.03)
    # 0.5 < 0.7: keep a second token; 0.75 >= 0.7: stop there.
    np.testing.assert_allclose(frequencies[2], [2 / 3, 1 / 3, 0, 0], atol=0.03)


def test_warpers_in_the_list_equal_the_keywords():
    for keywords, warpers in [
        ({"top_k": 2}, [ka.TopK(2)]),
        ({"top_p": 0.7, "temperature": 0.5}, [ka.Temperature(0.5), ka.TopP(0.7)]),
    ]:
        by_keyword, _ = first_tokens(**keywords)
        by_list, _ = first_tokens(processors=warpers)
        np.testing.assert_array_equal(by_keyword, by_list)


def test_warpers_shape_the_draw_not_the_scores():
    ids, log_probs = first_tokens(processors=[ka.TopK(2), ka.Temperature(0.5)])
    # TopK(2) then squared odds: 0.5^2 : 0.25^2 = 4 : 1.
    frequencies = np.bincount(ids, minlength=4) / len(ids)
    np.testing.assert_allclose(frequencies, [0.8, 0.2, 0, 0], atol=0.03)
    # The scores are each token's log-probability before the warpers.
    np.testing.assert_allclose(log_probs, np.log(PROBS)[ids], rtol=1e-6)


def test_a_warper_of_ones_own_comes_after_the_constraints():
    class OnlyTheLast(ka.LogitsWarper):  # draws the highest id left
        def __call__(self, log_probs, history, step):
            ids = ops.arange(ops.shape(log_probs)[1])[None]
            allowed = ops.logical_not(ops.isinf(log_probs))
            last = ops.max(ops.where(allowed, ids, -1), axis=1, keepdims=True)
            return ops.where(ids == last, log_probs, NEG)

    # The warper is listed first, yet sees token 3 banned.
    ids, log_probs = first_tokens(processors=[OnlyTheLast(), ka.BannedIds([3])])
    assert set(ids.tolist()) == {2}
    np.testing.assert_allclose(log_probs, np.log(0.15), rtol=1e-6)


def test_greedy_and_beam_refuse_warpers():
    for search, args in [(ka.greedy_search, ()), (ka.beam_search, (2,))]:
        with pytest.raises(ValueError, match=r"must hold no warpers.*\['TopK'\]"):
            search(fixed_step, None, STARTS[:2], END, 1, *args, processors=[ka.TopK(2)])


def test_argument_errors():
    with pytest.raises(ValueError, match="Received: temperature=0"):
        ka.Temperature(0)
    with pytest.raises(ValueError, match="Received: k=0"):
        ka.TopK(0)
    with pytest.raises(ValueError, match="Received: p=1.5"):
        ka.TopP(1.5)
    with pytest.raises(ValueError, match="Received: top_k=-1"):
        ka.sampling_search(fixed_step, None, STARTS[:2], END, 1, top_k=-1)
