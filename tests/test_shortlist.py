"""keras_attn.shortlist_log_distribution against a numpy reference."""

import numpy as np
import pytest
from keras import ops

import keras_attn as ka

V, OOV = 12, 3
# Row 0: source words above and below K, a repeat, an OOV and padding (id 0).
# Row 1: only shortlist words.
SOURCE = np.array([[9, 2, 9, 13, 0], [1, 3, 3, 4, 0]], "int32")
ATTENTION = np.array([[0.1, 0.3, 0.2, 0.4, 0.0], [0.25, 0.25, 0.25, 0.25, 0.0]])
P_GEN = np.array([[0.7], [0.4]])


def logits(seed=0):
    return np.random.default_rng(seed).normal(0, 2, (2, V)).astype("float32")


def reference(z, k, copy):
    """log of the shortlist's mixture, by enumeration."""
    out = np.full((2, V + (OOV if copy else 0)), -np.inf)
    for b in range(2):
        allowed = set(range(k)) | {int(w) for w in SOURCE[b] if w < V}
        p_vocab = np.zeros(V)
        idx = sorted(allowed)
        p_vocab[idx] = np.exp(z[b, idx] - z[b, idx].max())
        p_vocab /= p_vocab.sum()
        p = np.zeros(out.shape[1])
        p[:V] = P_GEN[b, 0] * p_vocab if copy else p_vocab
        if copy:
            for w, a in zip(SOURCE[b], ATTENTION[b], strict=True):
                p[w] += (1 - P_GEN[b, 0]) * a
        with np.errstate(divide="ignore"):
            out[b] = np.log(p)
    return out


def call(z, k, copy):
    source_logits = np.take_along_axis(z, np.minimum(SOURCE, V - 1), -1)
    # What an OOV position holds must not matter.
    source_logits = np.where(SOURCE >= V, 50.0, source_logits).astype("float32")
    kwargs = dict(p_gen=P_GEN, attention=ATTENTION, num_oov=OOV) if copy else {}
    # Without copying, an OOV's logit is meaningless too.
    out = ka.shortlist_log_distribution(z[:, :k], source_logits, SOURCE, V, **kwargs)
    return ops.convert_to_numpy(out)


@pytest.mark.parametrize("copy", [True, False])
@pytest.mark.parametrize("k", [3, 6, V])
def test_shortlist_equals_the_renormalised_distribution(k, copy):
    z = logits(k)
    expected = reference(z, k, copy)
    got = call(z, k, copy)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(expected))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-5, atol=1e-5)
    # Row 0's word 9 is outside the first K, but in the source: kept.
    assert np.isfinite(got[0, 9])
    if k < 8:
        assert np.isneginf(got[0, 8]) and np.isneginf(got[1, 8])


def test_the_whole_vocabulary_is_the_exact_distribution():
    z = logits(1)
    exact = ka.pointer_generator_log_distribution(
        P_GEN, z, ATTENTION, SOURCE, num_oov=OOV
    )
    np.testing.assert_allclose(call(z, V, True), ops.convert_to_numpy(exact), atol=1e-5)


def test_errors():
    z = logits()
    with pytest.raises(
        ValueError, match="static last dimension in \\[1, vocab_size=12\\]"
    ):
        ka.shortlist_log_distribution(np.zeros((2, V + 1)), z[:, :5], SOURCE, V)
    with pytest.raises(ValueError, match="num_oov=3, p_gen=None"):
        ka.shortlist_log_distribution(z[:, :4], z[:, :5], SOURCE, V, num_oov=OOV)
