"""Shapes, layers and inputs shared by the coverage and pointer-generator tests
(test_coverage_pointer.py, test_coverage_pointer_models.py)."""

import numpy as np
from keras import ops

from keras_attn.copy.coverage import CoverageAttention

B, TQ, TV, DQ, DV, UNITS = 2, 4, 5, 3, 6, 7
VOCAB, NUM_OOV = 9, 3


def np_(x):
    return ops.convert_to_numpy(x)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def make_coverage_layer(rng, **kwargs):
    layer = CoverageAttention(UNITS, **kwargs)
    layer.build([(None, TQ, DQ), (None, TV, DV)])
    # A large w_c, so the coverage visibly changes the weights.
    layer.coverage_kernel.assign(rng.normal(size=(UNITS,)) * 2)
    if layer.bias is not None:
        layer.bias.assign(rng.normal(size=(UNITS,)) * 0.1)
    return layer


def coverage_inputs(rng):
    query = rng.normal(size=(B, TQ, DQ)).astype("float32")
    value = rng.normal(size=(B, TV, DV)).astype("float32")
    value_mask = np.ones((B, TV), bool)
    value_mask[1, 3:] = False
    query_mask = np.ones((B, TQ), bool)
    query_mask[0, 2] = False  # a hole, not only trailing padding
    query_mask[1, 3:] = False
    return query, value, value_mask, query_mask


def pointer_inputs(rng, steps=True):
    lead = (B, TQ) if steps else (B,)
    p_gen = rng.uniform(0.1, 0.9, size=(*lead, 1)).astype("float32")
    vocab = softmax(rng.normal(size=(*lead, VOCAB))).astype("float32")
    # Duplicates (3 three times, OOV slot 0 twice) and padding (id 0, a=0).
    source_ids = np.array(
        [[3, 5, 3, VOCAB, 3], [VOCAB + 1, 2, VOCAB + 1, 0, 0]], "int32"
    )
    source_mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], bool)
    logits = rng.normal(size=(*lead, TV))
    if steps:
        attention = softmax(np.where(source_mask[:, None], logits, -1e9))
    else:
        attention = softmax(np.where(source_mask, logits, -1e9))
    return p_gen, vocab, attention.astype("float32"), source_ids
