"""Coverage attention and the pointer-generator in models: serialization,
`fit`, XLA, mixed precision against float32.

Runs on any Keras backend. The shapes and inputs are
`coverage_pointer_inputs.py`'s; `rng` comes from `conftest.py`.
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
)
from keras import ops
from reference_math import coverage_attention

from keras_attn.copy.coverage import CoverageAttention, coverage_loss
from keras_attn.copy.distributions import (
    PointerGenerator,
    pointer_generator_distribution,
    pointer_generator_nll,
)


def build_model():
    q_in = keras.Input((None, DQ))
    v_in = keras.Input((None, DV))
    context, weights, coverage = CoverageAttention(UNITS, name="coverage")(
        [q_in, v_in], return_attention_scores=True, return_coverage=True
    )
    p_gen = PointerGenerator(name="p_gen")([context, q_in, q_in])
    return keras.Model([q_in, v_in], [context, weights, coverage, p_gen])


def test_serialization_round_trip(rng, tmp_path):
    model = build_model()
    query, value, _, _ = coverage_inputs(rng)
    expected = [np_(y) for y in model([query, value])]
    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    got = [np_(y) for y in restored([query, value])]
    for e, g in zip(expected, got, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-6)
    # predict compiles (tf.function / jax.jit) with Tq unknown.
    predicted = restored.predict([query, value], verbose=0)
    np.testing.assert_allclose(predicted[2], expected[2], atol=1e-5)
    config = restored.get_layer("coverage").get_config()
    assert config["units"] == UNITS


def _reference_loss(layer, query, value):
    """The mean squared context of the numpy reference (`reference_math`),
    in float64 from `layer`'s weights; no mask."""
    mask = np.ones((B, 1, TV), bool)
    context, _ = coverage_attention(
        layer, query, value, value, mask, np.ones((B, TQ), bool)
    )
    return np.mean(context**2)


def _reference_gradient(layer, query, value, step=1e-3):
    """d `_reference_loss` / d w_c by central differences on the reference."""
    kernel = layer.coverage_kernel
    start = np_(kernel).copy()
    grad = np.zeros(start.shape)
    for i in range(start.size):
        shift = np.zeros_like(start)
        shift[i] = step
        kernel.assign(start + shift)
        up = _reference_loss(layer, query, value)
        kernel.assign(start - shift)
        down = _reference_loss(layer, query, value)
        grad[i] = (up - down) / (2 * step)
    kernel.assign(start)
    return grad


def test_fit_through_the_coverage_loop(rng):
    model = build_model()
    layer = model.get_layer("coverage")
    # A large w_c, so the coverage weighs in the scores and its gradient.
    layer.coverage_kernel.assign(rng.normal(size=(UNITS,)) * 2)
    query, value, _, _ = coverage_inputs(rng)
    context_only = keras.Model(model.inputs, model.outputs[0])
    lr = 1.0
    context_only.compile(optimizer=keras.optimizers.SGD(lr), loss="mse")
    before = np_(layer.coverage_kernel).copy()
    expected_loss = _reference_loss(layer, query, value)
    grad = _reference_gradient(layer, query, value)
    assert np.abs(grad).max() > 1e-3, "w_c has no gradient: nothing to compare"
    history = context_only.fit(
        [query, value], np.zeros((B, TQ, DV), "float32"), epochs=1, verbose=0
    )
    # One batch: the epoch's loss is the loss before the step.
    np.testing.assert_allclose(history.history["loss"][0], expected_loss, rtol=1e-5)
    # One plain SGD step: w_c moves by -lr * gradient.
    after = np_(layer.coverage_kernel)
    np.testing.assert_allclose(after - before, -lr * grad, rtol=1e-3, atol=1e-6)


@pytest.mark.tf_only
def test_tensorflow_xla_gradient_with_unknown_lengths(rng):
    import tensorflow as tf

    layer = make_coverage_layer(rng)
    spec = [
        tf.TensorSpec((None, None, DQ)),
        tf.TensorSpec((None, None, DV)),
        tf.TensorSpec((None, None), tf.bool),
    ]

    @tf.function(jit_compile=True, input_signature=spec)
    def loss_and_grads(query, value, query_mask):
        with tf.GradientTape() as tape:
            weights, coverage = layer(
                [query, value],
                query_mask=query_mask,
                return_attention_scores=True,
                return_coverage=True,
            )[1:]
            loss = coverage_loss(weights, coverage, mask=query_mask)
        return loss, tape.gradient(loss, layer.trainable_variables)

    query, value, value_mask, query_mask = coverage_inputs(rng)
    loss, grads = loss_and_grads(query, value, query_mask)
    weights, coverage = layer(
        [query, value],
        query_mask=query_mask,
        return_attention_scores=True,
        return_coverage=True,
    )[1:]
    expected = coverage_loss(weights, coverage, mask=query_mask)
    np.testing.assert_allclose(float(loss), float(np_(expected)), rtol=1e-5)
    assert all(np.all(np.isfinite(np_(g))) for g in grads)


def _coverage_and_copy(rng, value_mask, normalize=False, weights=None):
    """Every output of coverage + copy under the current policy, as float32.

    `weights`: the float32 run's layer weights, so both runs compute the
    same function.
    """
    layer = CoverageAttention(UNITS, normalize=normalize)
    p_layer = PointerGenerator()
    query, value, _, query_mask = coverage_inputs(rng)
    layer.build([query.shape, value.shape])
    p_layer.build([(B, TQ, DV), query.shape, query.shape])
    if weights is not None:
        layer.set_weights(weights[0])
        p_layer.set_weights(weights[1])
    context, attention, coverage = layer(
        [query, value],
        value_mask=value_mask,
        query_mask=query_mask,
        return_attention_scores=True,
        return_coverage=True,
    )
    p_gen = p_layer([context, query, query])
    _, vocab, _, source_ids = pointer_inputs(rng)
    logits = ops.cast(np.log(vocab), layer.compute_dtype)
    probs = pointer_generator_distribution(
        p_gen, logits, attention, source_ids, NUM_OOV, from_logits=True
    )
    targets = np.array([[3, VOCAB, 7, VOCAB + 2], [VOCAB + 1, 2, 0, 8]])
    nll = pointer_generator_nll(
        p_gen, logits, attention, source_ids, targets, mask=query_mask, from_logits=True
    )
    outputs = {
        "context": context,
        "attention": attention,
        "coverage": coverage,
        "p_gen": p_gen,
        "probs": probs,
        "nll": nll,
        "coverage_loss": coverage_loss(attention, coverage, mask=query_mask),
    }
    dtypes = {k: keras.backend.standardize_dtype(v.dtype) for k, v in outputs.items()}
    values = {k: np_(ops.cast(v, "float32")) for k, v in outputs.items()}
    return values, dtypes, (layer.get_weights(), p_layer.get_weights())


# One rounding costs 2^-11 (5e-4) relative in float16 and 2^-8 (4e-3) in
# bfloat16; outputs of size ~1 after a few roundings are off by a few times
# that. Largest error seen over all outputs, TF and torch (seed 7, with and
# without `normalize`): 1.0e-3 (float16) and 9.3e-3 (bfloat16), the context's.
# The bounds leave 4x and 3x.
MIXED_ATOL = {"mixed_float16": 4e-3, "mixed_bfloat16": 3e-2}


@pytest.mark.parametrize("policy", sorted(MIXED_ATOL))
@pytest.mark.parametrize("normalize", [False, True], ids=["plain", "normalize"])
def test_mixed_precision_matches_float32(rng, policy, normalize):
    value_mask = np.ones((B, TV), bool)
    value_mask[1, 3:] = False
    seed = int(rng.integers(1 << 30))
    want, _, weights = _coverage_and_copy(
        np.random.default_rng(seed), value_mask, normalize
    )
    keras.mixed_precision.set_global_policy(policy)
    got, dtypes, _ = _coverage_and_copy(
        np.random.default_rng(seed), value_mask, normalize, weights
    )
    compute = keras.mixed_precision.global_policy().compute_dtype
    assert dtypes["context"] == compute
    # Weights, coverage and probabilities stay float32 (softmax in float32).
    for name in ("attention", "coverage", "p_gen", "probs"):
        assert dtypes[name] == "float32", name
    for name in want:
        np.testing.assert_allclose(
            got[name], want[name], atol=MIXED_ATOL[policy], rtol=0, err_msg=name
        )


@pytest.mark.parametrize("policy", sorted(MIXED_ATOL))
def test_fully_masked_source_under_mixed_precision(rng, policy):
    # The usual NaN: a mask constant that overflows, or 0/0 in the softmax.
    keras.mixed_precision.set_global_policy(policy)
    value_mask = np.ones((B, TV), bool)
    value_mask[0] = False
    out, _, _ = _coverage_and_copy(rng, value_mask)
    for name, value in out.items():
        assert np.all(np.isfinite(value)), name
    assert np.all(out["context"][0] == 0) and np.all(out["attention"][0] == 0)
    assert np.all(out["coverage"][0] == 0)
    # Row 1's query steps 0-2 (step 3 is masked) sum to 1.
    np.testing.assert_allclose(out["attention"][1, :3].sum(-1), 1.0, atol=1e-3)
