"""Coverage attention and the pointer-generator against numpy references.

Runs on any Keras backend (`KERAS_BACKEND=tensorflow|jax|torch`). Fixtures
`rng`, `gradient` and `precise_dtype` come from `conftest.py`.
"""

import keras
import numpy as np
import pytest
from coverage_pointer_inputs import (
    DQ,
    DV,
    NUM_OOV,
    TQ,
    TV,
    UNITS,
    VOCAB,
    B,
    coverage_inputs,
    make_coverage_layer,
    np_,
    pointer_inputs,
    sigmoid,
    softmax,
)
from keras import ops

from keras_attn.copy.coverage import CoverageAttention, coverage_loss
from keras_attn.copy.distributions import (
    PointerGenerator,
    copy_distribution,
    log_partition,
    mix_target_probabilities,
    pointer_generator_distribution,
    pointer_generator_log_distribution,
    pointer_generator_nll,
    target_probabilities,
)


def finite_difference(fn, x, eps=1e-2):
    if keras.backend.backend() == "jax":
        import jax

        fn = jax.jit(fn)  # one compilation instead of slow eager dispatch
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[idx] += eps
        minus[idx] -= eps
        out[idx] = (float(np_(fn(plus))) - float(np_(fn(minus)))) / (2 * eps)
    return out


# ------------------------------------------------------------------ coverage


def reference_coverage(layer, query, value, value_mask, query_mask, cov0):
    wk, wq = np_(layer.key_kernel), np_(layer.query_kernel)
    v, b, wc = np_(layer.score_vector), np_(layer.bias), np_(layer.coverage_kernel)
    keys = value @ wk
    cov = cov0.copy()
    weights, coverages = [], []
    for t in range(query.shape[1]):
        hidden = keys + (query[:, t] @ wq)[:, None] + cov[..., None] * wc + b
        scores = np.tanh(hidden) @ v
        a = softmax(np.where(value_mask, scores, -1e9)) * value_mask
        coverages.append(cov.copy())
        weights.append(a)
        cov = cov + a * query_mask[:, t : t + 1]
    weights = np.stack(weights, 1) * query_mask[..., None]
    return weights @ value, weights, np.stack(coverages, 1)


def test_coverage_call_matches_reference(rng):
    layer = make_coverage_layer(rng)
    query, value, value_mask, query_mask = coverage_inputs(rng)
    cov0 = rng.uniform(size=(B, TV)).astype("float32") * value_mask
    context, weights, coverage = layer(
        [query, value],
        value_mask=value_mask,
        query_mask=query_mask,
        coverage=cov0,
        return_attention_scores=True,
        return_coverage=True,
    )
    ref_context, ref_weights, ref_coverage = reference_coverage(
        layer, query, value, value_mask, query_mask.astype("float32"), cov0
    )
    np.testing.assert_allclose(np_(weights), ref_weights, atol=1e-5)
    np.testing.assert_allclose(np_(coverage), ref_coverage, atol=1e-5)
    np.testing.assert_allclose(np_(context), ref_context, atol=1e-5)
    assert np_(weights).dtype == np.float32 and np_(coverage).dtype == np.float32


def test_coverage_changes_the_weights(rng):
    layer = make_coverage_layer(rng)
    query, value, _, _ = coverage_inputs(rng)
    with_cov = np_(layer([query, value], return_attention_scores=True)[1])
    # Without coverage every step is plain Bahdanau on its own query.
    plain = np.stack(
        [
            np_(layer([query[:, t], value], return_attention_scores=True)[1])
            for t in range(TQ)
        ],
        1,
    )
    np.testing.assert_allclose(with_cov[:, 0], plain[:, 0], atol=1e-6)
    assert np.abs(with_cov[:, 1:] - plain[:, 1:]).max() > 1e-3


def test_coverage_step_by_step_equals_full_call(rng):
    layer = make_coverage_layer(rng)
    query, value, value_mask, _ = coverage_inputs(rng)
    full_w, full_c = layer(
        [query, value],
        value_mask=value_mask,
        return_attention_scores=True,
        return_coverage=True,
    )[1:]
    memory = layer.prepare_memory(value, value_mask=value_mask)
    coverage = layer.initial_coverage(memory)
    for t in range(TQ):
        # `step` forwards the coverage to the score...
        _, w_step = layer.step(query[:, t], memory, coverage=coverage)
        # ...and `coverage_step` also accumulates it.
        _, w, new_coverage = layer.coverage_step(query[:, t], memory, coverage)
        np.testing.assert_allclose(np_(w), np_(w_step), atol=1e-6)
        np.testing.assert_allclose(np_(coverage), np_(full_c)[:, t], atol=1e-5)
        np.testing.assert_allclose(np_(w), np_(full_w)[:, t], atol=1e-5)
        coverage = new_coverage


def test_coverage_single_step_call(rng):
    layer = make_coverage_layer(rng)
    query, value, value_mask, _ = coverage_inputs(rng)
    cov = rng.uniform(size=(B, TV)).astype("float32")
    context, weights, coverage = layer(
        [query[:, 0], value],
        value_mask=value_mask,
        coverage=cov,
        return_attention_scores=True,
        return_coverage=True,
    )
    assert tuple(context.shape) == (B, DV) and tuple(weights.shape) == (B, TV)
    memory = layer.prepare_memory(value, value_mask=value_mask)
    _, ref = layer.step(query[:, 0], memory, coverage=cov)
    np.testing.assert_allclose(np_(weights), np_(ref), atol=1e-6)
    np.testing.assert_allclose(np_(coverage), cov)


def test_coverage_causal_self_attention(rng):
    layer = CoverageAttention(UNITS)
    x = rng.normal(size=(B, TV, DV)).astype("float32")
    weights = np_(layer([x, x], use_causal_mask=True, return_attention_scores=True)[1])
    assert np.allclose(np.triu(weights, 1), 0.0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


def test_coverage_loss_reference(rng):
    a = rng.uniform(size=(B, TQ, TV)).astype("float32")
    c = rng.uniform(size=(B, TQ, TV)).astype("float32") * 2
    mask = np.array([[1, 1, 0, 1], [1, 0, 0, 0]], bool)
    per_step = np.minimum(a, c).sum(-1) * mask
    np.testing.assert_allclose(
        np_(coverage_loss(a, c, mask)), per_step.sum() / mask.sum(), rtol=1e-5
    )
    np.testing.assert_allclose(
        np_(coverage_loss(a, c, mask, reduction="none")), per_step, rtol=1e-5
    )
    np.testing.assert_allclose(
        np_(coverage_loss(a, c)), np.minimum(a, c).sum(-1).mean(), rtol=1e-5
    )
    np.testing.assert_allclose(
        np_(coverage_loss(a[:, 0], c[:, 0])),
        np.minimum(a[:, 0], c[:, 0]).sum(-1).mean(),
        rtol=1e-5,
    )
    # The first step has zero coverage, hence zero loss.
    assert float(np_(coverage_loss(a[:, 0], np.zeros_like(a[:, 0])))) == 0.0


def test_coverage_gradient_finite_difference(rng, gradient, precise_dtype):
    dtype = precise_dtype
    layer = make_coverage_layer(rng, dtype=dtype)
    value = rng.normal(size=(1, 3, DV)).astype(dtype)
    query = rng.normal(size=(1, 3, DQ)).astype(dtype)
    r = rng.normal(size=(1, 3, DV)).astype(dtype)

    def fn(q):
        context, weights, coverage = layer(
            [q, value], return_attention_scores=True, return_coverage=True
        )
        return ops.sum(ops.multiply(context, r)) + 3.0 * coverage_loss(
            weights, coverage
        )

    analytic = gradient(fn, query)[0]
    if dtype == "float64":
        numeric = finite_difference(fn, query, eps=1e-6)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)
    else:
        numeric = finite_difference(fn, query)
        np.testing.assert_allclose(analytic, numeric, rtol=2e-2, atol=2e-3)
    # The loss sees query 0 through the coverage of later steps too.
    assert np.abs(analytic[0, 0]).max() > 0


def test_coverage_errors(rng):
    layer = make_coverage_layer(rng)
    query, value, _, _ = coverage_inputs(rng)
    with pytest.raises(ValueError, match="Received coverage shape"):
        layer([query, value], coverage=np.zeros((B, TQ, TV), "float32"))
    with pytest.raises(ValueError, match="Received: reduction"):
        coverage_loss(
            np.zeros((B, TV), "float32"), np.zeros((B, TV), "float32"), reduction="avg"
        )
    with pytest.raises(ValueError, match="Received attention shape"):
        coverage_loss(np.zeros((B, TQ, TV), "float32"), np.zeros((B, TV), "float32"))


# ------------------------------------------------------------------ pointer


def test_pointer_generator_reference(rng):
    layer = PointerGenerator()
    c = rng.normal(size=(B, TQ, 5)).astype("float32")
    s = rng.normal(size=(B, TQ, 4)).astype("float32")
    x = rng.normal(size=(B, TQ, 3)).astype("float32")
    p_gen = layer([c, s, x])
    layer.bias.assign(np.array([0.3], "float32"))
    p_gen = np_(layer([c, s, x]))
    w_c, w_s, w_x = (np_(k) for k in layer.kernels)
    ref = sigmoid(c @ w_c + s @ w_s + x @ w_x + 0.3)
    assert p_gen.shape == (B, TQ, 1) and p_gen.dtype == np.float32
    np.testing.assert_allclose(p_gen, ref, rtol=1e-5)
    assert layer.compute_output_shape([c.shape, s.shape, x.shape]) == (B, TQ, 1)
    assert np_(layer([c[:, 0], s[:, 0], x[:, 0]])).shape == (B, 1)
    with pytest.raises(ValueError, match="Received"):
        layer([c, s])
    with pytest.raises(ValueError, match="Received shapes"):
        PointerGenerator()([c, s[:, 0], x])


def reference_distribution(p_gen, vocab, attention, source_ids, num_oov):
    lead = vocab.shape[:-1]
    out = np.zeros((*lead, VOCAB + num_oov))
    out[..., :VOCAB] = p_gen * vocab
    for idx in np.ndindex(lead):
        for i, w in enumerate(source_ids[idx[0]]):
            out[idx + (w,)] += (1 - p_gen[idx][0]) * attention[idx + (i,)]
    return out


@pytest.mark.parametrize("steps", [True, False])
def test_pointer_distribution_reference(rng, steps):
    p_gen, vocab, attention, source_ids = pointer_inputs(rng, steps)
    probs = np_(
        pointer_generator_distribution(p_gen, vocab, attention, source_ids, NUM_OOV)
    )
    ref = reference_distribution(p_gen, vocab, attention, source_ids, NUM_OOV)
    assert probs.dtype == np.float32
    assert probs.shape == (*vocab.shape[:-1], VOCAB + NUM_OOV)
    np.testing.assert_allclose(probs, ref, atol=1e-6)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
    # Duplicated source word 3 gets the sum of its three weights.
    a0 = attention[0, 0] if steps else attention[0]
    g0 = p_gen[0, 0, 0] if steps else p_gen[0, 0]
    v0 = vocab[0, 0] if steps else vocab[0]
    p0 = probs[0, 0] if steps else probs[0]
    np.testing.assert_allclose(
        p0[3], g0 * v0[3] + (1 - g0) * (a0[0] + a0[2] + a0[4]), rtol=1e-5
    )
    # OOV slots hold copy mass only; unused slots hold nothing.
    np.testing.assert_allclose(p0[VOCAB], (1 - g0) * a0[3], rtol=1e-5)
    assert p0[VOCAB + 1] == 0 and p0[VOCAB + 2] == 0
    p1 = probs[1, 0] if steps else probs[1]
    a1 = attention[1, 0] if steps else attention[1]
    g1 = p_gen[1, 0, 0] if steps else p_gen[1, 0]
    np.testing.assert_allclose(p1[VOCAB + 1], (1 - g1) * (a1[0] + a1[2]), rtol=1e-5)


def test_copy_distribution_and_from_logits(rng):
    p_gen, vocab, attention, source_ids = pointer_inputs(rng)
    copied = np_(copy_distribution(attention, source_ids, VOCAB + NUM_OOV))
    # Each word gets the attention of every source position holding it.
    one_hot = np.eye(VOCAB + NUM_OOV)[source_ids]  # (B, TV, V + OOV)
    expected = np.einsum("bts,bsw->btw", attention, one_hot)
    np.testing.assert_allclose(copied, expected, atol=1e-6)
    np.testing.assert_allclose(copied.sum(-1), 1.0, atol=1e-5)
    logits = np.log(vocab) + 1.7  # same softmax
    np.testing.assert_allclose(
        np_(
            pointer_generator_distribution(
                p_gen, logits, attention, source_ids, NUM_OOV, from_logits=True
            )
        ),
        np_(
            pointer_generator_distribution(p_gen, vocab, attention, source_ids, NUM_OOV)
        ),
        atol=1e-6,
    )


def test_pointer_log_distribution_equals_log_of_the_dense_one(rng):
    p_gen, vocab, attention, source_ids = pointer_inputs(rng, steps=False)
    logits = (np.log(vocab) + 0.3).astype("float32")
    log_probs = np_(
        pointer_generator_log_distribution(
            p_gen, logits, attention, source_ids, NUM_OOV
        )
    )
    ref = reference_distribution(p_gen, vocab, attention, source_ids, NUM_OOV)
    assert log_probs.dtype == np.float32 and log_probs.shape == ref.shape
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(log_probs, np.log(ref), rtol=1e-5, atol=1e-6)
    # Unused OOV slots are impossible, not log(epsilon).
    assert log_probs[0, VOCAB + 1] == -np.inf and log_probs[1, VOCAB + 2] == -np.inf
    # The duplicated word 3: log(p_gen P_vocab(3) + (1 - p_gen)(a0 + a2 + a4)).
    g, a = p_gen[0, 0], attention[0]
    np.testing.assert_allclose(
        log_probs[0, 3],
        np.log(g * vocab[0, 3] + (1 - g) * (a[0] + a[2] + a[4])),
        rtol=1e-5,
    )
    # Where the dense probability underflows in float32, the log stays exact.
    far = logits.copy()
    far[:, 7] -= 200.0
    log_far = np_(
        pointer_generator_log_distribution(p_gen, far, attention, source_ids, NUM_OOV)
    )
    expected = far[:, 7] - np.log(np.exp(far.astype("float64")).sum(-1))
    np.testing.assert_allclose(log_far[:, 7], expected + np.log(p_gen[:, 0]), rtol=1e-5)
    with pytest.raises(ValueError, match="logits shape"):
        pointer_generator_log_distribution(
            p_gen, logits[:, None], attention, source_ids
        )


def test_log_partition_equals_logsumexp(rng):
    logits = rng.normal(0.0, 5.0, (5, 1000)).astype("float32")
    logits[1] *= 20.0  # exp would overflow without the shift
    logits[2, ::2] = -np.inf  # banned words
    logits[3] = 7.25  # a flat row: the softmax's peak is 1 / V
    logits[4] = -np.inf  # nothing left: -inf, as logsumexp gives
    with np.errstate(invalid="ignore", divide="ignore"):
        shifted = logits - logits.max(1, keepdims=True)
        expected = logits.max(1) + np.log(np.exp(shifted.astype("float64")).sum(1))
    got = np_(log_partition(ops.convert_to_tensor(logits)))[:, 0]
    np.testing.assert_allclose(got[:4], expected[:4], rtol=1e-6)
    np.testing.assert_allclose(got[3], 7.25 + np.log(1000.0), rtol=1e-6)
    assert got[4] == -np.inf


@pytest.mark.parametrize("from_logits", [False, True])
def test_target_probabilities_equal_gather(rng, from_logits):
    p_gen, vocab, attention, source_ids = pointer_inputs(rng)
    vocab_in = np.log(vocab) - 0.5 if from_logits else vocab
    full = np_(
        pointer_generator_distribution(
            p_gen, vocab_in, attention, source_ids, NUM_OOV, from_logits=from_logits
        )
    )
    targets = np.array([[3, VOCAB, 7, VOCAB + 2], [VOCAB + 1, 2, 0, 8]], "int32")
    probs = np_(
        target_probabilities(
            p_gen[..., 0],
            vocab_in,
            attention,
            source_ids,
            targets,
            from_logits=from_logits,
        )
    )
    np.testing.assert_allclose(
        probs, np.take_along_axis(full, targets[..., None], -1)[..., 0], atol=1e-6
    )
    # A target OOV that is not in the source has probability 0.
    assert probs[0, 3] == 0.0


def test_mix_target_probabilities_from_the_target_vocab_probability(rng):
    p_gen, vocab, attention, source_ids = pointer_inputs(rng)
    full = np_(
        pointer_generator_distribution(p_gen, vocab, attention, source_ids, NUM_OOV)
    )
    targets = np.array([[3, VOCAB, 7, VOCAB + 2], [VOCAB + 1, 2, 0, 8]], "int32")
    in_vocab = targets < VOCAB
    generated = np.where(
        in_vocab,
        np.take_along_axis(vocab, np.minimum(targets, VOCAB - 1)[..., None], -1)[
            ..., 0
        ],
        0.0,
    )
    probs = np_(
        mix_target_probabilities(p_gen, generated, attention, source_ids, targets)
    )
    np.testing.assert_allclose(
        probs, np.take_along_axis(full, targets[..., None], -1)[..., 0], atol=1e-6
    )
    with pytest.raises(ValueError, match="attention"):
        mix_target_probabilities(p_gen, generated, attention[0], source_ids, targets)


def test_pointer_nll_reference(rng):
    p_gen, vocab, attention, source_ids = pointer_inputs(rng)
    targets = np.array([[3, VOCAB, 7, VOCAB + 2], [VOCAB + 1, 2, 0, 8]], "int32")
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], bool)
    full = reference_distribution(p_gen, vocab, attention, source_ids, NUM_OOV)
    ref_p = np.take_along_axis(full, targets[..., None], -1)[..., 0]
    ref = -np.log(ref_p + 1e-10) * mask
    loss = pointer_generator_nll(
        p_gen, vocab, attention, source_ids, targets, mask=mask
    )
    np.testing.assert_allclose(np_(loss), ref.sum() / mask.sum(), rtol=1e-5)
    per_token = np_(
        pointer_generator_nll(
            p_gen, vocab, attention, source_ids, targets, mask=mask, reduction="none"
        )
    )
    np.testing.assert_allclose(per_token, ref, rtol=1e-5, atol=1e-6)
    # The masked target has P = 0: finite loss, not counted.
    assert np.isfinite(np_(loss))
    with pytest.raises(ValueError, match="Received: num_oov"):
        pointer_generator_distribution(p_gen, vocab, attention, source_ids, num_oov=-1)
    with pytest.raises(ValueError, match="Received source_ids shape"):
        pointer_generator_distribution(p_gen, vocab, attention, source_ids[:, :2])


def test_pointer_nll_gradient_finite_difference(rng, gradient):
    v, tv, t = 4, 3, 2
    source_ids = np.array([[1, v, 1]], "int32")
    targets = np.array([[1, v]], "int32")
    sizes = [t * 1, t * v, t * tv]

    def fn(x):
        pg, vl, al = ops.split(x, np.cumsum(sizes)[:-1].tolist())
        p_gen = ops.sigmoid(ops.reshape(pg, (1, t, 1)))
        attention = ops.softmax(ops.reshape(al, (1, t, tv)), axis=-1)
        return pointer_generator_nll(
            p_gen,
            ops.reshape(vl, (1, t, v)),
            attention,
            source_ids,
            targets,
            from_logits=True,
        )

    x = rng.normal(size=(sum(sizes),)).astype("float32")
    np.testing.assert_allclose(
        gradient(fn, x)[0], finite_difference(fn, x), rtol=2e-2, atol=2e-3
    )
