"""keras_attn.training.loss_reduction: one masked reduction for the library's losses
(`pointer_generator_nll`, `coverage_loss`, `pointer_network_nll`). A masked entry is
dropped by a select, whatever it holds (inf, NaN). Numbers by hand."""

import numpy as np
import pytest
from keras import ops

import keras_attn as ka
from keras_attn.training.loss_reduction import reduce_masked

INF, NAN = np.inf, np.nan
# Row 2 is all masked; the masked entries hold inf and NaN.
LOSSES = np.array([[1.0, 2.0, INF], [NAN, 4.0, 5.0], [7.0, NAN, INF]], "float32")
VALID = np.array([[1, 1, 0], [0, 1, 1], [0, 0, 0]], bool)
LOSSES, VALID = ops.convert_to_tensor(LOSSES), ops.convert_to_tensor(VALID)


def reduced(losses, valid, reduction):
    return ops.convert_to_numpy(reduce_masked(losses, valid, reduction))


def test_masked_entries_are_dropped_whatever_they_hold():
    np.testing.assert_array_equal(
        reduced(LOSSES, VALID, "none"), [[1, 2, 0], [0, 4, 5], [0, 0, 0]]
    )
    # 1 + 2 + 4 + 5 over the 4 valid entries; the masked row adds nothing.
    assert reduced(LOSSES, VALID, "sum") == 12.0
    assert reduced(LOSSES, VALID, "mean") == 3.0


def test_nothing_valid_gives_zero_and_no_mask_counts_everything():
    nothing = np.zeros_like(VALID)
    assert reduced(LOSSES, nothing, "mean") == 0.0
    assert reduced(LOSSES, nothing, "sum") == 0.0
    assert reduced(np.array([[1.0, 2.0], [3.0, 6.0]], "float32"), None, "mean") == 3.0


def test_argument_errors():
    with pytest.raises(ValueError, match="Received: reduction='avg'"):
        reduce_masked(LOSSES, VALID, "avg")
    with pytest.raises(ValueError, match=r"Received: mask.shape=\(3,\)"):
        reduce_masked(LOSSES, VALID[0], "mean")
    for loss in (
        lambda: ka.coverage_loss(np.ones((1, 2)), np.ones((1, 2)), reduction="avg"),
        lambda: ka.pointer_network_nll(np.zeros((1, 1, 2)), [[0]], reduction="avg"),
    ):
        with pytest.raises(ValueError, match="Received: reduction='avg'"):
            loss()


def test_the_losses_share_it():
    # coverage: step 0 sums min(0.5, 0.2) + min(0.5, 0.6) = 0.7; step 1 is
    # masked and NaN; the second example is all masked.
    attention = np.array([[[0.5, 0.5], [NAN, NAN]], [[1.0, 0.0], [0.0, 1.0]]])
    coverage = np.array([[[0.2, 0.6], [1.0, 1.0]], [[0.0, 0.0], [1.0, 0.0]]])
    mask = np.array([[1, 0], [0, 0]])
    out = ka.coverage_loss(
        attention.astype("float32"), coverage.astype("float32"), mask
    )
    np.testing.assert_allclose(ops.convert_to_numpy(out), 0.7, rtol=1e-6)
    per_step = ka.coverage_loss(
        attention.astype("float32"), coverage.astype("float32"), mask, "none"
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(per_step), [[0.7, 0.0], [0.0, 0.0]], rtol=1e-6
    )
    # pointer network: targets [2, END, pad] and an all-padding row.
    probs = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1], [0.1, 0.8, 0.1]])
    log_probs = np.log(np.stack([probs, probs])).astype("float32")
    targets = np.array([[2, 0, -1], [-1, -1, -1]])
    out = ka.pointer_network_nll(log_probs, targets)
    expected = -(np.log(0.5) + np.log(0.6)) / 2
    np.testing.assert_allclose(ops.convert_to_numpy(out), expected, rtol=1e-6)
