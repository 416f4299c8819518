"""Sampled softmax: the sampler's distribution and the estimate's limit."""

import math

import numpy as np
import pytest
from keras import ops

from models.model.sampled_softmax import (
    log_uniform_candidates,
    log_uniform_log_prob,
    sampled_log_softmax,
)


def np_(x):
    return ops.convert_to_numpy(x)


def exact_log_softmax(features, rows, bias, targets):
    logits = features @ rows.T + (0.0 if bias is None else bias)
    logits = logits - logits.max(-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]


def test_log_uniform_probabilities_sum_to_one_and_match_samples():
    vocab = 30
    q = np.exp(np_(log_uniform_log_prob(np.arange(vocab), vocab)))
    np.testing.assert_allclose(q.sum(), 1.0, atol=1e-5)
    # Hand-computed: Q(0) = log 2 / log 31.
    np.testing.assert_allclose(q[0], math.log(2) / math.log(31), rtol=1e-5)
    ids, log_q = log_uniform_candidates(100_000, vocab, seed=3)
    ids = np_(ids)
    assert ids.dtype == np.int32 and ids.min() >= 0 and ids.max() < vocab
    np.testing.assert_allclose(np.exp(np_(log_q)), q[ids], rtol=1e-5)
    frequencies = np.bincount(ids, minlength=vocab) / len(ids)
    np.testing.assert_allclose(frequencies, q, atol=0.005)


def test_hand_computed_estimate():
    # V = 3, D = 1: logits u = (1, 2, 3) for feature 1; target 0; samples
    # (1, 2) with Q = (0.5, 0.25): Z = e^1 + e^2 / (2 * 0.5) + e^3 / (2 * 0.25).
    rows = np.array([[1.0], [2.0], [3.0]], "float32")
    features = np.array([[1.0]], "float32")
    got = np_(
        sampled_log_softmax(
            features,
            rows,
            None,
            np.array([0]),
            np.array([1, 2]),
            np.log(np.array([0.5, 0.25], "float32")),
        )
    )
    expected = 1.0 - math.log(math.e + math.e**2 + 2 * math.e**3)
    np.testing.assert_allclose(got, [expected], rtol=1e-5)


def test_samples_of_the_target_are_not_counted_twice():
    rows = np.eye(4, dtype="float32")
    features = np.array([[0.5, 1.0, -1.0, 2.0]], "float32")
    # Every sample is the target: Z = e^{u_y} alone, log P = 0.
    got = np_(
        sampled_log_softmax(
            features,
            rows,
            None,
            np.array([3]),
            np.array([3, 3, 3]),
            np.zeros(3, "float32"),
        )
    )
    np.testing.assert_allclose(got, [0.0], atol=1e-6)


@pytest.mark.parametrize("with_bias", [False, True])
def test_estimate_converges_to_the_full_softmax(with_bias):
    rng = np.random.default_rng(0)
    vocab, dim = 50, 8
    # Scale 0.3: logits of a few units, as in a trained model (the variance
    # of the estimate grows with the spread of the logits).
    rows = 0.3 * rng.normal(size=(vocab, dim)).astype("float32")
    bias = rng.normal(size=vocab).astype("float32") if with_bias else None
    features = rng.normal(size=(3, 4, dim)).astype("float32")
    targets = rng.integers(0, vocab, (3, 4))
    ids, log_q = log_uniform_candidates(200_000, vocab, seed=1)
    got = np_(sampled_log_softmax(features, rows, bias, targets, ids, log_q))
    assert got.shape == (3, 4)
    np.testing.assert_allclose(
        got, exact_log_softmax(features, rows, bias, targets), atol=0.05
    )


def test_bad_sizes_are_rejected():
    with pytest.raises(ValueError, match="num_sampled=0"):
        log_uniform_candidates(0, 10)
