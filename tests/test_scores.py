"""Score layers against numpy references, decoding API, precision, errors.

Tests taking `spec` run once per score layer (see `conftest.SPECS`).
"""

import re

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka
from keras_attn.layers.base import AttentionMemory

BACKEND = keras.backend.backend()
B, TQ, TV, DQ = 2, 3, 5, 4
# Row 0 ends in two padding positions; row 1 is all real.
VALUE_MASK = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=bool)


def to_np(x):
    return np.asarray(ops.convert_to_numpy(x))


def dtype_of(x):
    return keras.backend.standardize_dtype(x.dtype)


def key_dim(spec):
    """Key dimension for a spec: different from `DQ` wherever allowed."""
    return DQ if spec.same_dims else 6


def make_built(spec, rng, query_dim, k_dim, value_dim=None, **kwargs):
    layer = spec.make(query_dim, k_dim, **kwargs)
    shapes = [(None, TQ, query_dim), (None, TV, value_dim or k_dim)]
    if value_dim is not None:
        shapes.append((None, TV, k_dim))
    layer.build(shapes)
    return layer


def inputs(rng, *shapes, dtype="float32"):
    return [rng.normal(size=s).astype(dtype) for s in shapes]


# ------------------------------------------------------------ numpy references


def test_matches_numpy_reference(spec, ref, rng):
    dk = key_dim(spec)
    query, value = inputs(rng, (B, TQ, DQ), (B, TV, dk))
    layer = make_built(spec, rng, DQ, dk)
    ref.randomize_weights(layer, rng)

    context, weights = layer(
        [query, value], value_mask=VALUE_MASK, return_attention_scores=True
    )
    expected_context, expected_weights = ref.attention(
        spec, layer, query, value, value_mask=VALUE_MASK
    )
    assert tuple(context.shape) == (B, TQ, dk)
    assert dtype_of(weights) == "float32"
    np.testing.assert_allclose(to_np(weights), expected_weights, atol=1e-5)
    np.testing.assert_allclose(to_np(context), expected_context, atol=1e-5)
    assert np.all(to_np(weights)[0, :, 3:] == 0)


def test_separate_key_and_value(spec, ref, rng):
    dk, dv = key_dim(spec), 3
    query, value, key = inputs(rng, (B, TQ, DQ), (B, TV, dv), (B, TV, dk))
    layer = make_built(spec, rng, DQ, dk, value_dim=dv)
    ref.randomize_weights(layer, rng)

    context, weights = layer(
        [query, value, key], value_mask=VALUE_MASK, return_attention_scores=True
    )
    expected_context, expected_weights = ref.attention(
        spec, layer, query, value, key=key, value_mask=VALUE_MASK
    )
    assert tuple(context.shape) == (B, TQ, dv)
    np.testing.assert_allclose(to_np(weights), expected_weights, atol=1e-5)
    np.testing.assert_allclose(to_np(context), expected_context, atol=1e-5)


def test_single_step_query_equals_tq1(spec, ref, rng):
    dk, dv = key_dim(spec), 3
    query, value, key = inputs(rng, (B, DQ), (B, TV, dv), (B, TV, dk))
    layer = make_built(spec, rng, DQ, dk, value_dim=dv)
    ref.randomize_weights(layer, rng)

    step_context, step_weights = layer(
        [query, value, key], value_mask=VALUE_MASK, return_attention_scores=True
    )
    seq_context, seq_weights = layer(
        [query[:, None], value, key],
        value_mask=VALUE_MASK,
        return_attention_scores=True,
    )
    assert tuple(step_context.shape) == (B, dv)
    assert tuple(step_weights.shape) == (B, TV)
    np.testing.assert_allclose(to_np(step_context), to_np(seq_context)[:, 0], atol=1e-6)
    np.testing.assert_allclose(to_np(step_weights), to_np(seq_weights)[:, 0], atol=1e-6)
    # A rank-1 query mask for a rank-2 query.
    masked = to_np(
        layer(
            [query, value, key],
            query_mask=np.array([True, False]),
            value_mask=VALUE_MASK,
        )
    )
    np.testing.assert_allclose(masked[0], to_np(step_context)[0], atol=1e-6)
    assert np.all(masked[1] == 0)


def test_prepare_memory_and_step_equal_call(spec, ref, rng):
    dk, dv = key_dim(spec), 3
    query, value, key = inputs(rng, (B, DQ), (B, TV, dv), (B, TV, dk))
    layer = make_built(spec, rng, DQ, dk, value_dim=dv)
    ref.randomize_weights(layer, rng)

    memory = layer.prepare_memory(value, key=key, value_mask=VALUE_MASK)
    assert isinstance(memory, AttentionMemory)
    context, weights = layer.step(query, memory)
    expected_context, expected_weights = layer(
        [query, value, key], value_mask=VALUE_MASK, return_attention_scores=True
    )
    assert dtype_of(weights) == "float32"
    np.testing.assert_allclose(to_np(context), to_np(expected_context), atol=1e-6)
    np.testing.assert_allclose(to_np(weights), to_np(expected_weights), atol=1e-6)

    # Without a mask, the memory attends everywhere.
    context, _ = layer.step(query, layer.prepare_memory(value, key=key))
    np.testing.assert_allclose(
        to_np(context), to_np(layer([query, value, key])), atol=1e-6
    )


@pytest.mark.specs(
    "dot",
    "dot_scale",
    "scaled_dot",
    "general",
    "general_scale",
    "concat",
    "bahdanau",
    "bahdanau_normalize",
    "network",
)
def test_scores_are_the_reference_logits_unmasked(spec, ref, rng):
    dk, dv = key_dim(spec), 3
    query, value, key = inputs(rng, (B, TQ, DQ), (B, TV, dv), (B, TV, dk))
    layer = make_built(spec, rng, DQ, dk, value_dim=dv)
    ref.randomize_weights(layer, rng)
    memory = layer.prepare_memory(value, key=key, value_mask=VALUE_MASK)

    expected = spec.reference(layer, query.astype("float64"), key.astype("float64"))
    scores = layer.scores(query, memory)
    assert tuple(scores.shape) == (B, TQ, TV)
    # The padding keeps its score: masking is the caller's.
    np.testing.assert_allclose(to_np(scores), expected, atol=1e-5)
    step_scores = layer.scores(query[:, 0], memory)
    assert tuple(step_scores.shape) == (B, TV)
    np.testing.assert_allclose(to_np(step_scores), expected[:, 0], atol=1e-5)


def test_scores_refuse_a_memory_of_another_batch(rng):
    layer = ka.DotAttention()
    layer.build([(2, 4), (2, 5, 4)])
    memory = layer.prepare_memory(rng.normal(size=(2, 5, 4)).astype("float32"))
    with pytest.raises(ValueError, match="batch"):
        layer.scores(np.ones((3, 4), "float32"), memory)


def test_dot_with_scale_matches_keras_attention(rng):
    query, value, key = inputs(rng, (B, TQ, DQ), (B, TV, 3), (B, TV, DQ))
    query_mask = np.array([[1, 1, 0], [1, 1, 1]], dtype=bool)
    ours = ka.DotAttention(use_scale=True)
    theirs = keras.layers.Attention(use_scale=True)
    ours([query, value, key])
    theirs([query, value, key])
    ours.scale.assign(0.7)
    theirs.scale.assign(0.7)

    context, weights = ours(
        [query, value, key],
        query_mask=query_mask,
        value_mask=VALUE_MASK,
        return_attention_scores=True,
    )
    # The value mask broadcast over the queries, `(B, 1, TV)`: Keras' layer
    # before 3.12 adds a `(B, TV)` one to the `(B, TQ, TV)` scores unexpanded.
    expected_context, expected_weights = theirs(
        [query, value, key],
        mask=[query_mask, VALUE_MASK[:, None, :]],
        return_attention_scores=True,
    )
    np.testing.assert_allclose(to_np(context), to_np(expected_context), atol=1e-6)
    # Keras leaves the weights of masked queries as they are; ours zeroes them.
    np.testing.assert_allclose(
        to_np(weights)[query_mask], to_np(expected_weights)[query_mask], atol=1e-6
    )
    assert np.all(to_np(weights)[~query_mask] == 0)


def test_dropout_only_in_training(rng):
    query, value = inputs(rng, (B, TQ, DQ), (B, TV, DQ))
    layer = ka.DotAttention(dropout=0.5, seed=1)
    inference = to_np(layer([query, value]))
    np.testing.assert_allclose(to_np(layer([query, value], training=False)), inference)
    context, weights = layer(
        [query, value], training=True, return_attention_scores=True
    )
    assert not np.allclose(to_np(context), inference)
    # The returned weights are the distribution before dropout.
    np.testing.assert_allclose(to_np(weights).sum(-1), 1.0, atol=1e-6)


# ------------------------------------------------------------ gradients


def test_gradient_matches_finite_differences(spec, precise_dtype, gradient, ref, rng):
    dtype = precise_dtype
    dq = 3
    dk = dq if spec.same_dims else 4
    query, value = inputs(rng, (2, 2, dq), (2, 3, dk), dtype=dtype)
    value_mask = np.array([[1, 1, 0], [1, 1, 1]], dtype=bool)
    target = rng.normal(size=(2, 2, dk)).astype(dtype)
    layer = spec.make(dq, dk, dtype=dtype)
    layer.build([query.shape, value.shape])
    ref.randomize_weights(layer, rng)

    def losses(q, v, copies=1):
        """Loss of each of `copies` stacked copies of the batch."""
        context = layer([q, v], value_mask=np.tile(value_mask, (copies, 1)))
        context = ops.reshape(context, (copies, *target.shape))
        weighted = context * ops.convert_to_tensor(target, dtype=dtype)
        return ops.sum(ops.reshape(weighted, (copies, -1)), axis=-1)

    grad_query, grad_value = gradient(lambda q, v: losses(q, v)[0], query, value)
    if BACKEND == "jax":
        import jax

        # Eager JAX compiles every op for the new batch size: compile once.
        losses = jax.jit(losses, static_argnames="copies")

    # Central differences, every perturbed copy of the batch in one call.
    eps = 1e-6 if dtype == "float64" else 1e-3
    sizes = (query.size, value.size)
    deltas = np.eye(sum(sizes)) * eps
    shifted = []
    for x, delta in zip(
        (query, value), np.split(deltas, [sizes[0]], axis=1), strict=True
    ):
        delta = delta.reshape(-1, *x.shape)
        shifted.append(np.concatenate([x + delta, x - delta]))
    copies = 2 * sum(sizes)
    flat = [s.reshape(copies * s.shape[1], *s.shape[2:]) for s in shifted]
    plus, minus = np.split(to_np(losses(*flat, copies=copies)), 2)
    numeric = (plus - minus) / (2 * eps)

    assert grad_query.dtype == np.dtype(dtype)
    tol = {"rtol": 1e-6, "atol": 1e-9} if dtype == "float64" else {"atol": 2e-3}
    np.testing.assert_allclose(grad_query.ravel(), numeric[: sizes[0]], **tol)
    np.testing.assert_allclose(grad_value.ravel(), numeric[sizes[0] :], **tol)
    # A masked value (and key) has no influence at all.
    assert np.all(grad_value[0, 2] == 0)


# ------------------------------------------------------------ mixed precision


@pytest.fixture(params=["mixed_float16", "mixed_bfloat16"])
def mixed_policy(request):
    keras.config.set_dtype_policy(request.param)
    yield keras.config.dtype_policy()
    keras.config.set_dtype_policy("float32")


def test_mixed_precision(spec, mixed_policy, ref, rng):
    dk = key_dim(spec)
    query, value = inputs(rng, (B, TQ, DQ), (B, TV, dk))
    layer = spec.make(DQ, dk)
    context, weights = layer(
        [query, value], value_mask=VALUE_MASK, return_attention_scores=True
    )
    compute_dtype = mixed_policy.compute_dtype
    assert layer.compute_dtype == compute_dtype
    assert dtype_of(context) == compute_dtype
    assert dtype_of(weights) == "float32"
    assert all(dtype_of(w) == "float32" for w in layer.weights)
    context = to_np(ops.cast(context, "float32"))
    weights = to_np(weights)
    assert np.all(np.isfinite(context)) and np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(weights[0, :, 3:] == 0)
    # Close to the full-precision result with the same weights.
    expected_context, expected_weights = ref.attention(
        spec, layer, query, value, value_mask=VALUE_MASK
    )
    # One rounding costs 2^-11 relative in float16, 2^-8 in bfloat16; scores
    # of size ~10 (|q| |k| over 4 dims) are then off by ~0.005 and ~0.04, and
    # the weights by about as much: 4x and 2x margins.
    atol = 0.02 if compute_dtype == "float16" else 0.08
    np.testing.assert_allclose(weights, expected_weights, atol=atol)
    np.testing.assert_allclose(context, expected_context, atol=atol)


# ------------------------------------------------------------ compiled training


def test_fit_one_step_compiled(ref, rng):
    """Every score layer in one tiny model (one compilation), fitted one step."""
    query, value = inputs(rng, (4, TQ, DQ), (4, TV, DQ))
    target = rng.normal(size=(4, 1)).astype("float32")
    q_in, v_in = keras.Input((TQ, DQ)), keras.Input((TV, DQ))
    layers = {spec.id: spec.make(DQ, DQ) for spec in ref.specs}
    contexts = [
        keras.layers.Flatten()(layer([q_in, v_in])) for layer in layers.values()
    ]
    output = keras.layers.Dense(1)(keras.layers.Concatenate()(contexts))
    model = keras.Model([q_in, v_in], output)
    # XLA on TensorFlow and JAX; torch.compile is out of scope here.
    jit_compile = BACKEND != "torch"
    model.compile(
        optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=jit_compile
    )
    assert model.jit_compile == jit_compile
    before = {
        w.path: to_np(w).copy() for layer in layers.values() for w in layer.weights
    }

    history = model.fit([query, value], target, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    for layer in layers.values():
        for w in layer.trainable_weights:
            if w.path.endswith("score_out/bias"):
                continue  # Shifts every score alike: the softmax ignores it.
            assert not np.allclose(before[w.path], to_np(w)), w.path
    # The loop checks every layer with weights; only these two have none.
    assert {k for k, v in layers.items() if not v.trainable_weights} == {
        "dot",
        "scaled_dot",
    }


# ------------------------------------------------------------ errors


def _shapes_error(layer, shapes, match):
    tensors = [np.zeros(s, "float32") for s in shapes]
    with pytest.raises(ValueError, match=match):
        layer(tensors)


def test_error_query_rank():
    _shapes_error(
        ka.BahdanauAttention(4),
        [(2, 3, 4, 1), (2, 5, 4)],
        re.escape("Received query shape: (2, 3, 4, 1)"),
    )


def test_error_value_and_key_rank():
    _shapes_error(
        ka.GeneralAttention(),
        [(2, 3, 4), (2, 5)],
        re.escape("Received value shape: (2, 5)"),
    )
    _shapes_error(
        ka.GeneralAttention(),
        [(2, 3, 4), (2, 5, 4), (2, 5)],
        re.escape("Received key shape: (2, 5)"),
    )


def test_error_not_a_list():
    with pytest.raises(ValueError, match=re.escape("Received input shapes: (2, 3, 4)")):
        ka.DotAttention()(np.zeros((2, 3, 4), "float32"))


@pytest.mark.parametrize("layer_cls", [ka.DotAttention, ka.ScaledDotAttention])
def test_error_dot_needs_same_dims(layer_cls):
    _shapes_error(
        layer_cls(),
        [(2, 3, 4), (2, 5, 6)],
        re.escape("Received query_dim=4, key_dim=6"),
    )


def test_error_key_value_length_mismatch():
    _shapes_error(
        ka.BahdanauAttention(4),
        [(2, 3, 4), (2, 5, 4), (2, 6, 4)],
        re.escape("Received key shape (2, 6, 4) and value shape (2, 5, 4)"),
    )


@pytest.mark.parametrize("units", [0, -3, 2.5, "8"])
@pytest.mark.parametrize("layer_cls", [ka.BahdanauAttention, ka.ConcatAttention])
def test_error_bad_units(layer_cls, units):
    with pytest.raises(ValueError, match=re.escape(f"Received: units={units}")):
        layer_cls(units=units)


@pytest.mark.parametrize("dropout", [-0.1, 1.0, 1.5])
def test_error_bad_dropout(dropout):
    with pytest.raises(ValueError, match=re.escape(f"Received: dropout={dropout}")):
        ka.GeneralAttention(dropout=dropout)


def test_error_bad_network():
    with pytest.raises(ValueError, match=re.escape("Received: network='dense'")):
        ka.NetworkAttention("dense")


def test_error_prepare_memory_before_build():
    with pytest.raises(ValueError, match="BahdanauAttention is not built"):
        ka.BahdanauAttention(4).prepare_memory(np.zeros((2, 5, 4), "float32"))
