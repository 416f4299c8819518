"""`AttentionRNN`'s gradients against central finite differences, every style.

The backend's own autodiff (`gradient` from conftest.py) differentiates a
weighted sum of the outputs with respect to the inputs and the memory. All
finite differences are taken in one batched call: the rows of a batch are
independent, so row `2k` (`2k + 1`) holds the inputs with entry `k` moved by
`+eps` (`-eps`), and each row's own loss gives one difference.
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn import AttentionCellWrapper, AttentionRNN, BahdanauAttention

T, TV, D, DM, UNITS = 3, 4, 2, 3, 3


def _layer(style, dtype):
    cell = AttentionCellWrapper(
        keras.layers.GRUCell(UNITS, dtype=dtype),
        BahdanauAttention(4, dtype=dtype),
        style=style,
        dtype=dtype,
        **({"max_length": T} if style == "self" else {}),
    )
    return AttentionRNN(cell, dtype=dtype)


def _row_losses(layer, style, weights, x, memory, memory_mask):
    if style == "self":
        outputs = layer(x)
    else:
        outputs = layer([x, memory], memory_mask=memory_mask)
    weighted = outputs * ops.convert_to_tensor(weights)
    return ops.sum(ops.reshape(weighted, (ops.shape(x)[0], -1)), axis=1)


def _batched_finite_differences(row_losses, arrays, eps):
    """Central differences of `sum(row_losses(*arrays))` for batch-1 arrays."""
    sizes = [a.size for a in arrays]
    n = sum(sizes)
    batches = [np.repeat(a, 2 * n, axis=0) for a in arrays]
    k = 0
    for batch, size in zip(batches, sizes, strict=True):
        flat = batch.reshape(2 * n, size)  # a view: edits `batch`
        for j in range(size):
            flat[2 * k, j] += eps
            flat[2 * k + 1, j] -= eps
            k += 1
    if keras.backend.backend() == "jax":
        import jax

        row_losses = jax.jit(row_losses)  # one compilation, not eager dispatch
    losses = ops.convert_to_numpy(ops.stop_gradient(row_losses(*batches)))
    losses = np.asarray(losses, np.float64)
    diffs = (losses[0::2] - losses[1::2]) / (2 * eps)
    parts = np.split(diffs, np.cumsum(sizes)[:-1])
    return [p.reshape(a.shape) for p, a in zip(parts, arrays, strict=True)]


@pytest.mark.parametrize("style", ["bahdanau", "luong", "self"])
def test_gradients_match_finite_differences(style, gradient, precise_dtype):
    dtype = precise_dtype
    rng = np.random.default_rng(0)
    layer = _layer(style, dtype)
    x = rng.normal(size=(1, T, D)).astype(dtype)
    memory = rng.normal(size=(1, TV, DM)).astype(dtype)
    # The last memory position is padding: no gradient may reach it.
    memory_mask = np.array([[True, True, True, False]])
    weights = rng.normal(size=(1, T, layer.cell.output_size)).astype(dtype)

    def row_losses(x, memory):
        mask = np.repeat(memory_mask, ops.shape(x)[0], axis=0)
        return _row_losses(layer, style, weights, x, memory, mask)

    # Built outside the traced functions (not by a call: slow eager on JAX).
    layer.build((None, T, D) if style == "self" else [(None, T, D), (None, TV, DM)])
    if style == "self":
        arrays, fn = [x], lambda x: row_losses(x, memory)
    else:
        arrays, fn = [x, memory], row_losses
    analytic = gradient(lambda *a: ops.sum(fn(*a)), *arrays)
    if dtype == "float64":
        numeric = _batched_finite_differences(fn, arrays, eps=1e-6)
        tolerance = dict(rtol=1e-6, atol=1e-8)
    else:
        # float32 (Keras computes float64 as float32 off TensorFlow): with
        # eps = 1e-2 the truncation error is ~eps^2 = 1e-4 relative and the
        # rounding error ~1e-7 / eps = 1e-5; the bounds leave 20x margin.
        numeric = _batched_finite_differences(fn, arrays, eps=1e-2)
        tolerance = dict(rtol=2e-2, atol=2e-3)
    for got, want in zip(analytic, numeric, strict=True):
        np.testing.assert_allclose(got, want, **tolerance)
    # Every input step matters to some output (no detached path).
    assert (np.abs(analytic[0]).sum(axis=-1) > 0).all()
    if style != "self":
        assert (analytic[1][0, :3] != 0).any(axis=-1).all()
        np.testing.assert_array_equal(analytic[1][0, 3], 0.0)
