"""Masks: propagated by Keras, explicit, causal, fully masked rows."""

import ast
from pathlib import Path

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka
from keras_attn.layers.masking import (
    causal_mask,
    combine_masks,
    keras_mask,
    masked_softmax,
    with_keras_mask,
)

B, TQ, TV, D = 2, 3, 5, 4
# Token ids; 0 is padding. Query row 0 ends in padding, value row 0 too.
QUERY_IDS = np.array([[3, 1, 0], [2, 5, 4]], dtype="int32")
VALUE_IDS = np.array([[7, 2, 9, 0, 0], [1, 3, 8, 6, 2]], dtype="int32")


def to_np(x):
    return np.asarray(ops.convert_to_numpy(x))


def make(spec):
    return spec.make(D, D)


# ------------------------------------------------------------ propagated masks


@pytest.mark.specs("dot", "general", "bahdanau", "network")
def test_embedding_mask_propagates_in_functional_model(spec):
    q_ids, v_ids = (
        keras.Input((None,), dtype="int32"),
        keras.Input((None,), dtype="int32"),
    )
    q_embed = keras.layers.Embedding(10, D, mask_zero=True)
    v_embed = keras.layers.Embedding(10, D, mask_zero=True)
    attention = make(spec)
    context, weights = attention(
        [q_embed(q_ids), v_embed(v_ids)], return_attention_scores=True
    )
    # Mask-aware pooling: averages only the unpadded query positions, if the
    # layer passes the query mask on.
    pooled = keras.layers.GlobalAveragePooling1D()(context)
    model = keras.Model([q_ids, v_ids], [context, weights, pooled])
    context, weights, pooled = (to_np(x) for x in model([QUERY_IDS, VALUE_IDS]))

    query_mask, value_mask = QUERY_IDS > 0, VALUE_IDS > 0
    expected_context, expected_weights = attention(
        [q_embed(QUERY_IDS), v_embed(VALUE_IDS)],
        query_mask=query_mask,
        value_mask=value_mask,
        return_attention_scores=True,
    )
    np.testing.assert_allclose(context, to_np(expected_context), atol=1e-6)
    np.testing.assert_allclose(weights, to_np(expected_weights), atol=1e-6)
    assert np.all(weights[0, :, 3:] == 0)
    assert np.all(weights[0, 2] == 0) and np.all(context[0, 2] == 0)
    np.testing.assert_allclose(weights[query_mask].sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(
        pooled[0], context[0, :2].mean(0), atol=1e-6
    )  # Not context[0].mean(0): the padded query position is left out.


def test_compute_mask_passes_query_mask_on():
    layer = ka.DotAttention()
    query, value = np.zeros((B, TQ, D), "float32"), np.zeros((B, TV, D), "float32")
    query_mask, value_mask = QUERY_IDS > 0, VALUE_IDS > 0
    out = layer.compute_mask([query, value], [query_mask, value_mask])
    np.testing.assert_array_equal(to_np(out), query_mask)
    assert layer.compute_mask([query, value], None) is None
    # A single decoder step has no time axis to mask.
    assert layer.compute_mask([query[:, 0], value], [query_mask[:, 0], None]) is None


def test_explicit_masks_override_propagated(rng):
    embed = keras.layers.Embedding(10, D, mask_zero=True)
    query, value = embed(QUERY_IDS), embed(VALUE_IDS)
    query_mask = np.array([[1, 0, 1], [1, 1, 0]], dtype=bool)
    value_mask = np.array([[1, 0, 1, 1, 1], [0, 1, 1, 1, 1]], dtype=bool)
    layer = ka.BahdanauAttention(units=5)
    got = layer(
        [query, value],
        mask=[QUERY_IDS > 0, VALUE_IDS > 0],
        query_mask=query_mask,
        value_mask=value_mask,
        return_attention_scores=True,
    )
    # Same tensors, with no Keras mask attached.
    plain = [ops.convert_to_tensor(to_np(x)) for x in (query, value)]
    want = layer(
        plain,
        query_mask=query_mask,
        value_mask=value_mask,
        return_attention_scores=True,
    )
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(to_np(g), to_np(w), atol=1e-6)
    weights = to_np(got[1])
    assert np.all(weights[0, 0, 1] == 0) and weights[0, 0, 3] > 0
    # The explicit masks, not the propagated ones (query 1 and value 3 real).
    assert np.all(weights[0, 1] == 0)
    assert np.all(weights[0, 2, value_mask[0]] > 0)


# ------------------------------------------------------------ fully masked rows


def test_fully_masked_row_gives_zero_context_and_finite_gradient(spec, gradient, rng):
    query = rng.normal(size=(B, TQ, D)).astype("float32")
    value = rng.normal(size=(B, TV, D)).astype("float32")
    value_mask = np.ones((B, TV), bool)
    value_mask[0] = False
    layer = make(spec)
    layer.build([query.shape, value.shape])

    context, weights = layer(
        [query, value], value_mask=value_mask, return_attention_scores=True
    )
    context, weights = to_np(context), to_np(weights)
    assert np.all(context[0] == 0) and np.all(weights[0] == 0)
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights[1].sum(-1), 1.0, atol=1e-6)

    def loss(q, v):
        return ops.sum(layer([q, v], value_mask=value_mask))

    grad_query, grad_value = gradient(loss, query, value)
    assert np.all(np.isfinite(grad_query)) and np.all(np.isfinite(grad_value))
    assert np.all(grad_query[0] == 0) and np.all(grad_value[0] == 0)
    assert np.any(grad_value[1] != 0)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_fully_masked_row_under_mixed_precision(spec, policy, rng):
    # The usual NaN: a mask constant that overflows float16, or 0/0.
    keras.config.set_dtype_policy(policy)
    query = rng.normal(size=(B, TQ, D)).astype("float32")
    value = rng.normal(size=(B, TV, D)).astype("float32")
    value_mask = np.ones((B, TV), bool)
    value_mask[0] = False
    layer = make(spec)
    context, weights = layer(
        [query, value], value_mask=value_mask, return_attention_scores=True
    )
    assert keras.backend.standardize_dtype(context.dtype) == layer.compute_dtype
    context = to_np(ops.cast(context, "float32"))
    weights = to_np(weights)
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
    assert np.all(context[0] == 0) and np.all(weights[0] == 0)
    np.testing.assert_allclose(weights[1].sum(-1), 1.0, atol=1e-3)


def test_fully_masked_row_in_step(rng):
    layer = ka.BahdanauAttention(units=5)
    value = rng.normal(size=(B, TV, D)).astype("float32")
    layer.build([(None, D), value.shape])
    mask = np.array([[0, 0, 0, 0, 0], [1, 1, 0, 0, 0]], bool)
    memory = layer.prepare_memory(value, value_mask=mask)
    context, weights = layer.step(rng.normal(size=(B, D)).astype("float32"), memory)
    context, weights = to_np(context), to_np(weights)
    assert np.all(context[0] == 0) and np.all(weights[0] == 0)
    np.testing.assert_allclose(weights[1].sum(), 1.0, atol=1e-6)
    assert np.all(weights[1, 2:] == 0)


# ------------------------------------------------------------ causal and query masks


@pytest.mark.specs("dot", "scaled_dot", "bahdanau", "network")
def test_causal_mask(spec, ref, rng):
    x = rng.normal(size=(B, TV, D)).astype("float32")
    value_mask = VALUE_IDS > 0
    layer = make(spec)
    layer.build([x.shape, x.shape])
    ref.randomize_weights(layer, rng)
    context, weights = layer(
        [x, x],
        value_mask=value_mask,
        use_causal_mask=True,
        return_attention_scores=True,
    )
    weights = to_np(weights)
    allowed = np.tril(np.ones((TV, TV), bool))[None] & value_mask[:, None, :]
    assert np.all(weights[~allowed] == 0)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)

    expected_weights = ref.masked_softmax(
        spec.reference(layer, x.astype(np.float64), x.astype(np.float64)), allowed
    )
    np.testing.assert_allclose(weights, expected_weights, atol=1e-5)
    np.testing.assert_allclose(to_np(context), expected_weights @ x, atol=1e-5)


def test_causal_mask_matches_keras_attention(rng):
    x = rng.normal(size=(B, TV, D)).astype("float32")
    ours = to_np(ka.DotAttention()([x, x], use_causal_mask=True))
    theirs = to_np(keras.layers.Attention()([x, x], use_causal_mask=True))
    np.testing.assert_allclose(ours, theirs, atol=1e-6)


def test_causal_mask_helper():
    np.testing.assert_array_equal(
        to_np(causal_mask(4, 4))[0], np.tril(np.ones((4, 4), bool))
    )
    # Tq < Tv: query i still sees values 0..i.
    np.testing.assert_array_equal(
        to_np(causal_mask(2, 3))[0], [[True, False, False], [True, True, False]]
    )
    assert combine_masks(None, None) is None
    np.testing.assert_array_equal(
        to_np(combine_masks(np.array([1, 1, 0]), None, np.array([True, False, True]))),
        [True, False, False],
    )


def test_query_mask_zeroes_outputs(spec, ref, rng):
    query = rng.normal(size=(B, TQ, D)).astype("float32")
    value = rng.normal(size=(B, TV, D)).astype("float32")
    query_mask = QUERY_IDS > 0
    layer = make(spec)
    full_context, full_weights = layer([query, value], return_attention_scores=True)
    context, weights = layer(
        [query, value], query_mask=query_mask, return_attention_scores=True
    )
    context, weights = to_np(context), to_np(weights)
    assert np.all(context[~query_mask] == 0) and np.all(weights[~query_mask] == 0)
    expected_context, expected_weights = ref.attention(
        spec, layer, query, value, query_mask=query_mask
    )
    np.testing.assert_allclose(weights, expected_weights, atol=1e-5)
    np.testing.assert_allclose(context, expected_context, atol=1e-5)
    if spec.attention is None:
        # Each query step on its own: a masked one changes no other step.
        np.testing.assert_allclose(
            context[query_mask], to_np(full_context)[query_mask], atol=1e-6
        )
        np.testing.assert_allclose(
            weights[query_mask], to_np(full_weights)[query_mask], atol=1e-6
        )


def test_a_nan_in_a_masked_query_row_is_cleared(spec, rng):
    query = rng.normal(size=(B, TQ, D)).astype("float32")
    value = rng.normal(size=(B, TV, D)).astype("float32")
    query_mask = QUERY_IDS > 0
    query[~query_mask] = np.nan
    context, weights = make(spec)(
        [query, value], query_mask=query_mask, return_attention_scores=True
    )
    context, weights = to_np(context), to_np(weights)
    assert np.all(context[~query_mask] == 0) and np.all(weights[~query_mask] == 0)
    assert np.isfinite(context).all() and np.isfinite(weights).all()


def test_keras_attn_imports_no_private_keras_module():
    # Keras' `keras.src` changes between releases; keras_attn supports 3.5 on.
    private = []
    for path in sorted(Path(ka.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            private += [f"{path.name}: {n}" for n in names if n.startswith("keras.src")]
    assert private == []


def test_a_mask_set_on_a_tensor_is_read_back():
    x = ops.ones((2, 3))
    assert keras_mask(x) is None and keras_mask(None) is None
    mask = ops.convert_to_tensor(QUERY_IDS > 0)
    x = with_keras_mask(x, mask)
    np.testing.assert_array_equal(to_np(keras_mask(x)), QUERY_IDS > 0)
    embedded = keras.layers.Embedding(10, D, mask_zero=True)(QUERY_IDS)
    np.testing.assert_array_equal(to_np(keras_mask(embedded)), QUERY_IDS > 0)


# ------------------------------------------------------------ masked_softmax


def test_masked_softmax(ref, rng):
    scores = rng.normal(scale=3.0, size=(B, TQ, TV)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]], bool)[:, None, :]
    weights = to_np(masked_softmax(scores, mask))
    np.testing.assert_allclose(weights, ref.masked_softmax(scores, mask), atol=1e-6)
    assert np.all(weights[1] == 0)
    np.testing.assert_allclose(
        to_np(masked_softmax(scores)), ref.masked_softmax(scores), atol=1e-6
    )


def test_masked_softmax_is_float32_for_half_scores():
    # Scores that overflow float16 once exponentiated, and a padding row.
    scores = np.array([[60000.0, 59990.0, -60000.0]], "float16")
    for dtype in ("float16", "bfloat16"):
        weights = masked_softmax(
            ops.cast(scores, dtype), np.array([[True, True, False]])
        )
        assert keras.backend.standardize_dtype(weights.dtype) == "float32"
        weights = to_np(weights)
        assert np.all(np.isfinite(weights))
        assert weights[0, 2] == 0
        np.testing.assert_allclose(weights.sum(), 1.0, atol=1e-6)
