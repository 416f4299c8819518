"""A wrapped cell's dropout (`keras_attn.recurrent.dropout_masks`), on every backend.

The dropout masks of a `GRUCell(dropout=..., recurrent_dropout=...)` inside
an `AttentionCellWrapper` are drawn with the wrapper's initial states, before
the time loop, so a model trains in JAX's `scan`, TensorFlow's `while_loop`
and the torch loop alike, each sequence with one set of masks, each batch
with a new one: in `AttentionRNN`, and in a plain `keras.layers.RNN` (given
`get_initial_state_with_memory`'s states, or, for `style="self"`, building
them itself).
"""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn import (
    AttentionCellWrapper,
    AttentionRNN,
    BahdanauAttention,
    DotAttention,
    ScaledDotAttention,
)

B, T, TV, D, DM, UNITS = 3, 4, 5, 3, 6, 6
# A GRU draws three input masks and three recurrent ones.
GRU_MASKS = 6


def _gru_with_dropout():
    # A seed of its own: torch draws from its seed generator only then.
    return keras.layers.GRUCell(UNITS, dropout=0.3, recurrent_dropout=0.3, seed=1)


def _arrays(style, batch=B, seed=0):
    rng = np.random.default_rng(seed)
    sequences = rng.normal(size=(batch, T, D)).astype("float32")
    if style == "self":
        return sequences
    return [sequences, rng.normal(size=(batch, TV, DM)).astype("float32")]


def _attention_rnn():
    cell = AttentionCellWrapper(_gru_with_dropout(), DotAttention(), style="luong")
    sequences, memory = keras.Input((T, D)), keras.Input((TV, DM))
    outputs = AttentionRNN(cell)([sequences, memory])
    model = keras.Model([sequences, memory], keras.layers.Dense(2)(outputs))
    return model, cell, "luong"


class PlainRNNDecoder(keras.Model):
    """A plain `keras.layers.RNN` over the cell, from the memory's states."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.cell = AttentionCellWrapper(
            _gru_with_dropout(), BahdanauAttention(4), style="bahdanau"
        )
        self.cell.build((None, D))
        self.rnn = keras.layers.RNN(self.cell, return_sequences=True)
        self.dense = keras.layers.Dense(2)

    def call(self, inputs, training=None):
        sequences, memory = inputs
        states = self.cell.get_initial_state_with_memory(memory, training=training)
        outputs = self.rnn(sequences, initial_state=states, training=training)
        return self.dense(outputs)


def _keras_rnn():
    model = PlainRNNDecoder()
    return model, model.cell, "bahdanau"


def _keras_rnn_self():
    cell = AttentionCellWrapper(
        _gru_with_dropout(), ScaledDotAttention(), style="self", max_length=2
    )
    sequences = keras.Input((T, D))
    outputs = keras.layers.RNN(cell, return_sequences=True)(sequences)
    return keras.Model(sequences, keras.layers.Dense(2)(outputs)), cell, "self"


MODELS = {
    "attention_rnn": _attention_rnn,
    "keras_rnn": _keras_rnn,
    "keras_rnn_self": _keras_rnn_self,
}


def _model(path, jit_compile="auto"):
    keras.utils.set_random_seed(0)
    model, cell, style = MODELS[path]()
    model.compile(keras.optimizers.SGD(0.1), "mse", jit_compile=jit_compile)
    return model, cell, style


def _fit_moves_every_weight(path, jit_compile):
    model, cell, style = _model(path, jit_compile)
    # Two batches of one size: under XLA, TensorFlow's step retraced for a
    # second size fails in the gradient of a score with weights, dropout or
    # not; new masks for a batch of another size are tested below.
    inputs = _arrays(style, batch=4)
    model(inputs)  # built
    before = [ops.convert_to_numpy(v) for v in model.trainable_variables]
    history = model.fit(
        inputs, np.ones((4, T, 2), "float32"), batch_size=2, epochs=1, verbose=0
    )
    assert np.isfinite(history.history["loss"][0])
    after = [ops.convert_to_numpy(v) for v in model.trainable_variables]
    still = [
        v.path
        for v, b, a in zip(model.trainable_variables, before, after, strict=True)
        if np.allclose(b, a)
    ]
    assert not still, still
    assert any(v is cell.cell.kernel for v in model.trainable_variables)


@pytest.mark.slow  # a few seconds of compiling
@pytest.mark.parametrize("path", MODELS)
def test_a_model_over_a_wrapped_dropout_cell_trains(path):
    # JAX's `jit`, TensorFlow's graph (no XLA on a CPU), torch eager.
    _fit_moves_every_weight(path, "auto")


@pytest.mark.slow  # a few seconds of compiling
@pytest.mark.tf_only  # XLA: on JAX the `jit` above, on torch `torch.compile`
@pytest.mark.parametrize("path", MODELS)
def test_a_model_over_a_wrapped_dropout_cell_trains_under_xla(path):
    _fit_moves_every_weight(path, True)


@pytest.mark.slow  # JAX runs each call's `scan` op by op
@pytest.mark.parametrize("path", MODELS)
def test_dropout_applies_in_training_only(path):
    model, _, style = _model(path)
    inputs = _arrays(style)
    inference = [ops.convert_to_numpy(model(inputs, training=False)) for _ in "ab"]
    np.testing.assert_array_equal(inference[0], inference[1])
    training = [ops.convert_to_numpy(model(inputs, training=True)) for _ in "ab"]
    assert not np.allclose(training[0], training[1])
    assert not np.allclose(training[0], inference[0])
    # A batch of another size: a mask kept from the last would not fit.
    smaller = model(_arrays(style, batch=2), training=True)
    assert tuple(smaller.shape) == (2, T, 2)


def test_inference_draws_no_mask_so_a_compiled_decoder_steps(compiled):
    # Step-by-step decoding (a search's step) under `jax.jit` or a
    # `tf.function`: a mask drawn there would move the seed's state inside
    # the trace (on JAX, a tracer kept in the variable).
    cell = AttentionCellWrapper(_gru_with_dropout(), DotAttention(), style="luong")
    cell.build((None, D))
    sequences, memory = _arrays("luong")
    cell.get_initial_state_with_memory(memory)  # built, outside the trace
    seed = ops.convert_to_numpy(cell.cell.seed_generator.state)

    def first_step(memory, step_input):
        states = cell.get_initial_state_with_memory(memory)
        return cell(step_input, states)[0]

    step = compiled(first_step)
    outputs = [ops.convert_to_numpy(step(memory, sequences[:, 0])) for _ in "ab"]
    np.testing.assert_array_equal(outputs[0], outputs[1])
    np.testing.assert_array_equal(
        ops.convert_to_numpy(cell.cell.seed_generator.state), seed
    )
    assert getattr(cell.cell, "_dropout_mask", None) is None


@pytest.mark.slow  # a few seconds of compiling
@pytest.mark.parametrize("path", MODELS)
def test_the_masks_are_drawn_once_a_sequence(path):
    # Six draws of the cell's seed for the batch: one set of masks for the
    # whole sequence, drawn for this batch, not kept from an earlier call.
    model, cell, style = _model(path)
    seed = cell.cell.seed_generator.state
    start = ops.convert_to_numpy(seed)
    model.train_on_batch(_arrays(style), np.ones((B, T, 2), "float32"))
    drawn = ops.convert_to_numpy(seed) - start
    np.testing.assert_array_equal(drawn, [0, GRU_MASKS])


@pytest.mark.slow  # a few seconds of compiling
def test_stacked_cells_dropout_masks_are_new_for_each_batch():
    keras.utils.set_random_seed(0)
    inner = [
        keras.layers.GRUCell(6, dropout=0.5, recurrent_dropout=0.5),
        keras.layers.LSTMCell(6, dropout=0.5, recurrent_dropout=0.5),
    ]
    cell = AttentionCellWrapper(
        keras.layers.StackedRNNCells(inner), BahdanauAttention(5), style="bahdanau"
    )
    sequences, memory = keras.Input((4, 3)), keras.Input((5, 7))
    outputs = AttentionRNN(cell)([sequences, memory])
    model = keras.Model([sequences, memory], keras.layers.Dense(2)(outputs))
    model.compile("sgd", "mse")
    rng = np.random.default_rng(0)
    # Two batches of other sizes: a mask kept from the first would not fit.
    for batch in (3, 2):
        x = rng.normal(size=(batch, 4, 3)).astype("float32")
        m = rng.normal(size=(batch, 5, 7)).astype("float32")
        loss = model.train_on_batch([x, m], np.zeros((batch, 4, 2), "float32"))
        assert np.isfinite(loss)
    for layer in inner:
        assert layer._dropout_mask is None
        assert layer._recurrent_dropout_mask is None
