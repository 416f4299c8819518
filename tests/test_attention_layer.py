"""`attention_layer=`: a Keras layer that makes a Luong or self-attentive
cell's attentional state in place of its `W_c` (TFA's `attention_layer`)."""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka

N = ops.convert_to_numpy
RNG = np.random.default_rng(0)
MEMORY = RNG.random((2, 5, 8), dtype="float32")
MEMORY_MASK = np.array([[1] * 5, [1] * 3 + [0] * 2], bool)
STATE = RNG.random((2, 16), dtype="float32")
INPUTS = RNG.random((2, 4, 3), dtype="float32")


def luong(**arguments):
    return ka.LuongAttentionCell(
        keras.layers.GRUCell(16), ka.GeneralAttention(), **arguments
    )


def test_the_layer_makes_the_attentional_state_from_context_and_state():
    dense = keras.layers.Dense(12, activation="sigmoid")
    cell = luong(attention_layer=dense)
    cell.build([(None, 3), (None, 5, 8)])
    assert cell.attention_units == 12 and tuple(dense.kernel.shape) == (24, 12)
    states = cell.get_initial_state_with_memory(MEMORY, MEMORY_MASK, STATE)
    output, _ = cell(INPUTS[:, 0], states)
    # By hand: s from the GRU on [y; h~_0 = 0], the general score, the layer.
    joined = np.concatenate([INPUTS[:, 0], np.zeros((2, 12), "float32")], -1)
    state = N(cell.cell(joined, [STATE])[0])
    scores = np.einsum("bd,de,bte->bt", state, N(cell.attention.kernel), MEMORY)
    scores = np.where(MEMORY_MASK, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    context = np.einsum("bt,btd->bd", weights, MEMORY)
    expected = N(dense(np.concatenate([context, state], -1)))
    np.testing.assert_allclose(N(output), expected, rtol=1e-5, atol=1e-6)


def test_a_tanh_dense_without_bias_is_the_cells_own_kernel():
    keras.utils.set_random_seed(0)
    own = luong(attention_units=12)
    given = luong(attention_layer=keras.layers.Dense(12, "tanh", use_bias=False))
    outputs = []
    for cell in (own, given):
        layer = ka.AttentionRNN(cell)
        layer([INPUTS, MEMORY], initial_state=STATE)
        outputs.append(layer)
    own_layer, given_layer = outputs
    given.cell.set_weights(own.cell.get_weights())
    given.attention.set_weights(own.attention.get_weights())
    given.attention_layer.kernel.assign(own.attention_kernel)
    np.testing.assert_allclose(
        N(given_layer([INPUTS, MEMORY], initial_state=STATE, memory_mask=MEMORY_MASK)),
        N(own_layer([INPUTS, MEMORY], initial_state=STATE, memory_mask=MEMORY_MASK)),
        atol=1e-6,
    )


def test_a_saved_model_keeps_the_layer_and_its_weights(tmp_path):
    inputs, memory = keras.Input((4, 3)), keras.Input((5, 8))
    state = keras.Input((16,))
    cell = luong(attention_layer=keras.layers.Dense(12), input_feeding=False)
    model = keras.Model(
        [inputs, memory, state],
        ka.AttentionRNN(cell)([inputs, memory], initial_state=state),
    )
    model.save(tmp_path / "cell.keras")
    again = keras.saving.load_model(tmp_path / "cell.keras")
    batch = [INPUTS, MEMORY, STATE]
    np.testing.assert_allclose(N(again(batch)), N(model(batch)), atol=1e-6)
    config = cell.get_config()
    assert "attention_units" not in config and config["attention_layer"]
    assert isinstance(
        ka.LuongAttentionCell.from_config(config).attention_layer, keras.layers.Dense
    )


def test_the_parallel_decoder_reads_the_layer_as_its_steps_do():
    keras.utils.set_random_seed(1)
    decoder = ka.AttentionDecoder(
        keras.layers.Embedding(10, 3),
        luong(attention_layer=keras.layers.Dense(12, "tanh"), input_feeding=False),
        keras.layers.Dense(10),
    )
    targets = np.array([[1, 4, 5, 6], [1, 7, 8, 0]], "int32")
    logits = N(decoder(targets, MEMORY, MEMORY_MASK, initial_state=STATE))
    states = decoder.initial_search_state(MEMORY, MEMORY_MASK, STATE)
    steps = []
    for t in range(targets.shape[1]):
        step_logits, states = decoder.step(ops.convert_to_tensor(targets[:, t]), states)
        steps.append(N(step_logits))
    np.testing.assert_allclose(np.stack(steps, 1), logits, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            {"attention_layer": keras.layers.ReLU()},
            "must be a Keras layer with an int `units`",
        ),
        (
            {"attention_layer": keras.layers.Dense(4), "attention_units": 8},
            "`attention_units` belongs to the kernel",
        ),
        (
            {"attention_layer": keras.layers.Dense(4), "attention_activation": None},
            "`attention_activation` belongs to the kernel",
        ),
        (
            {"attention_layer": keras.layers.Dense(4), "use_attention_layer": False},
            "`use_attention_layer=False` outputs the context itself",
        ),
    ],
)
def test_each_attention_layer_mistake_is_refused_in_one_line(arguments, message):
    with pytest.raises(ValueError, match=message) as raised:
        luong(**arguments)
    assert "Received" in str(raised.value) and "\n" not in str(raised.value)


def test_a_self_attentive_cell_takes_one_too():
    cell = ka.SelfAttentionCell(
        keras.layers.GRUCell(16),
        ka.ScaledDotAttention(),
        max_length=3,
        attention_layer=keras.layers.Dense(7),
    )
    outputs = keras.layers.RNN(cell, return_sequences=True)(INPUTS)
    assert tuple(outputs.shape) == (2, 4, 7)
