"""Small functional models of each layer family, for the export tests.

`build(family, unroll=False)` returns `(model, inputs)`: a built Keras model
whose outputs are a dict (so every runtime names them alike) and numpy
inputs by name, a batch of 3 with padding in every masked input. Used by
tests/test_deploy_layers.py; the families are those of tests/deploy_cases.py.
"""

import keras
import numpy as np
from keras import ops

import keras_attn as ka

BATCH, QUERY_LENGTH, VALUE_LENGTH, DIM = 3, 4, 5, 8
VOCAB, NUM_OOV = 6, 2
# Valid positions of each row's memory: full, partly and mostly padding.
LENGTHS = np.array([VALUE_LENGTH, 3, 1])


def _value_mask():
    return np.arange(VALUE_LENGTH)[None] < LENGTHS[:, None]


def _score_inputs(rng):
    return {
        "query": rng.normal(size=(BATCH, QUERY_LENGTH, DIM)).astype("float32"),
        "value": rng.normal(size=(BATCH, VALUE_LENGTH, DIM)).astype("float32"),
        "value_mask": _value_mask(),
    }


def _score_tensors():
    return (
        keras.Input((QUERY_LENGTH, DIM), name="query"),
        keras.Input((VALUE_LENGTH, DIM), name="value"),
        keras.Input((VALUE_LENGTH,), dtype="bool", name="value_mask"),
    )


def _score_network():
    """A user's score network `f(q, k)`, for `NetworkAttention`."""
    q, k = keras.Input((None, None, DIM)), keras.Input((None, None, DIM))
    hidden = keras.layers.Dense(DIM, activation="tanh")(
        keras.layers.Concatenate()([q, k])
    )
    return keras.Model([q, k], keras.layers.Dense(1)(hidden))


def score_layers():
    return [
        ka.DotAttention(),
        ka.ScaledDotAttention(),
        ka.GeneralAttention(),
        ka.ConcatAttention(DIM),
        ka.BahdanauAttention(DIM, normalize=True),
        ka.NetworkAttention(_score_network()),
    ]


def _score(rng, unroll):
    query, value, mask = _score_tensors()
    outputs = {}
    for i, layer in enumerate(score_layers()):
        context, weights = layer(
            [query, value], value_mask=mask, return_attention_scores=True
        )
        outputs[f"context_{i}"], outputs[f"weights_{i}"] = context, weights
    return keras.Model([query, value, mask], outputs), _score_inputs(rng)


def _recurrent(rng, unroll):
    query, value, mask = _score_tensors()
    outputs = {}
    for style, cell in (("bahdanau", keras.layers.GRUCell), ("luong", None)):
        cell = ka.AttentionCellWrapper(
            (cell or keras.layers.LSTMCell)(DIM),
            ka.BahdanauAttention(DIM) if style == "bahdanau" else ka.DotAttention(),
            style=style,
            return_alignments=True,
        )
        sequence, alignments = ka.AttentionRNN(cell, unroll=unroll)(
            [query, value], memory_mask=mask
        )
        outputs[f"{style}_outputs"] = sequence
        outputs[f"{style}_alignments"] = alignments
    return keras.Model([query, value, mask], outputs), _score_inputs(rng)


class CopyDistribution(keras.layers.Layer):
    """`pointer_generator_distribution` as a layer of a functional model."""

    def call(self, p_gen, vocab_probs, attention, source_ids):
        return ka.pointer_generator_distribution(
            p_gen, vocab_probs, attention, source_ids, num_oov=NUM_OOV
        )


def _coverage_copy(rng, unroll):
    query, value, mask = _score_tensors()
    source_ids = keras.Input((VALUE_LENGTH,), dtype="int32", name="source_ids")
    context, weights, coverage = ka.CoverageAttention(DIM)(
        [query, value],
        value_mask=mask,
        return_attention_scores=True,
        return_coverage=True,
    )
    p_gen = ka.PointerGenerator()([context, query, query])
    vocab_probs = keras.layers.Dense(VOCAB, activation="softmax")(query)
    probs = CopyDistribution()(p_gen, vocab_probs, weights, source_ids)
    outputs = {"context": context, "coverage": coverage, "probs": probs}
    inputs = _score_inputs(rng)
    ids = rng.integers(0, VOCAB + NUM_OOV, (BATCH, VALUE_LENGTH)).astype("int32")
    inputs["source_ids"] = np.where(inputs["value_mask"], ids, 0).astype("int32")
    model = keras.Model([query, value, mask, source_ids], outputs)
    return model, inputs


def _pointer_network(rng, unroll):
    points = keras.Input((VALUE_LENGTH, 2), name="points")
    targets = keras.Input((VALUE_LENGTH + 1,), dtype="int32", name="targets")
    mask = keras.Input((VALUE_LENGTH,), dtype="bool", name="points_mask")
    log_probs = ka.PointerNetwork(DIM, mask_chosen=True)(
        [points, targets], points_mask=mask
    )
    # Each row visits its valid points (1-based; 0 ends), then pads with -1.
    rows = []
    for length in LENGTHS:
        order = list(rng.permutation(length) + 1) + [0]
        rows.append(order + [-1] * (VALUE_LENGTH + 1 - len(order)))
    inputs = {
        "points": rng.random((BATCH, VALUE_LENGTH, 2)).astype("float32"),
        "targets": np.array(rows, "int32"),
        "points_mask": _value_mask(),
    }
    # -inf where a point is masked: compared as such, finite elsewhere.
    model = keras.Model([points, targets, mask], {"log_probs": log_probs})
    return model, inputs


def _entity_network(rng, unroll):
    words = 3
    story = keras.Input((QUERY_LENGTH, words), dtype="int32", name="story")
    question = keras.Input((words,), dtype="int32", name="question")
    embedding = keras.layers.Embedding(10, DIM, mask_zero=True)
    sentences = ka.PositionEncoder(words)(embedding(story))
    memory = keras.layers.RNN(
        ka.EntityMemoryCell(num_slots=3, units=DIM), unroll=unroll
    )(sentences)
    query = ops.sum(embedding(question), axis=1)
    logits = ka.EntityOutput(num_slots=3, output_dim=VOCAB)([query, memory])
    stories = rng.integers(1, 10, (BATCH, QUERY_LENGTH, words)).astype("int32")
    stories[1, 2:] = 0  # two padded sentences
    stories[2, 1:] = 0
    stories[0, 0, 2] = 0  # a padded word
    inputs = {
        "story": stories,
        "question": rng.integers(1, 10, (BATCH, words)).astype("int32"),
    }
    return keras.Model([story, question], {"logits": logits}), inputs


BUILDERS = {
    "score": _score,
    "recurrent": _recurrent,
    "coverage_copy": _coverage_copy,
    "pointer_network": _pointer_network,
    "entity_network": _entity_network,
}


def build(family, unroll=False, seed=0):
    """`(model, inputs)` of `family`, its recurrent loops unrolled if asked."""
    keras.utils.set_random_seed(seed)
    model, inputs = BUILDERS[family](np.random.default_rng(seed), unroll)
    model(inputs)  # every layer built, as `Model.export` needs
    return model, inputs
