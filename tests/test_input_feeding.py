"""Luong attention without input feeding, and the decoder that teacher-forces
such a cell in parallel."""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka

N = ops.convert_to_numpy
RNG = np.random.default_rng(0)
MEMORY = RNG.random((3, 5, 16), dtype="float32")
MEMORY_MASK = np.array([[1] * 5, [1] * 3 + [0] * 2, [1] * 4 + [0]], bool)
STATE = RNG.random((3, 16), dtype="float32")
SOURCE = np.array([[4, 5, 21, 22, 6], [7, 20, 8, 0, 0], [3, 4, 5, 23, 0]], "int32")
# The copying decoder is fed a copied word (21: the source's first OOV).
TARGET_IN = np.array([[1, 4, 21, 6], [1, 7, 0, 0], [1, 2, 9, 0]], "int32")
TARGET_IN_VOCABULARY = np.where(TARGET_IN < 20, TARGET_IN, 3)


def luong_cell(input_feeding, output_attention=True, attention=None):
    return ka.LuongAttentionCell(
        keras.layers.GRUCell(16),
        attention or ka.GeneralAttention(),
        input_feeding=input_feeding,
        output_attention=output_attention,
    )


def decoder(copy=None, copy_gate_state="output", **cell_arguments):
    keras.utils.set_random_seed(1)
    return ka.AttentionDecoder(
        keras.layers.Embedding(20, 8),
        luong_cell(False, **cell_arguments),
        keras.layers.Dense(20),
        copy=copy,
        unk_id=3 if copy else None,
        num_oov=5 if copy else None,
        copy_gate_state=copy_gate_state,
    )


def test_without_input_feeding_the_cell_reads_the_input_alone():
    cell = luong_cell(False)
    cell.build([(None, 8), (None, 5, 16)])
    assert tuple(cell.cell.kernel.shape) == (8, 48)  # GRU gates of y_t alone
    assert len(cell.state_size) == 1 + 1 + 3  # output, GRU state, the memory's
    inputs = RNG.random((3, 8), dtype="float32")
    states = cell.get_initial_state_with_memory(MEMORY, MEMORY_MASK, STATE)
    output, _ = cell(inputs, states)
    # By hand: s = GRU(y, h), Luong's general score s W h_i, h~ = tanh(W_c [c; s]).
    state, _ = cell.cell(inputs, [STATE])
    state = N(state)
    scores = np.einsum("bd,de,bte->bt", state, N(cell.attention.kernel), MEMORY)
    scores = np.where(MEMORY_MASK, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    context = np.einsum("bt,btd->bd", weights, MEMORY)
    expected = np.tanh(np.concatenate([context, state], -1) @ N(cell.attention_kernel))
    np.testing.assert_allclose(N(output), expected, rtol=1e-5, atol=1e-6)


def test_input_feeding_survives_the_config_and_defaults_to_true():
    cell = luong_cell(False)
    assert cell.get_config()["input_feeding"] is False
    assert ka.LuongAttentionCell.from_config(cell.get_config()).input_feeding is False
    old = luong_cell(True).get_config()
    del old["input_feeding"]  # a config saved before the argument existed
    assert ka.LuongAttentionCell.from_config(old).input_feeding is True


def test_input_feeding_must_be_a_bool():
    with pytest.raises(ValueError, match=r"Received: input_feeding='no'"):
        luong_cell("no")


@pytest.mark.parametrize(
    "cell_arguments",
    [{}, {"output_attention": False}, {"attention": ka.CoverageAttention(6)}],
    ids=["h~", "s_t", "coverage"],
)
def test_the_parallel_teacher_forcing_is_the_step_by_step_decoder(cell_arguments):
    model = decoder(**cell_arguments)
    logits = N(model(TARGET_IN_VOCABULARY, MEMORY, MEMORY_MASK, initial_state=STATE))
    assert hasattr(model, "teacher_rnn")
    states = model.initial_search_state(MEMORY, MEMORY_MASK, STATE)
    steps = []
    for t in range(TARGET_IN_VOCABULARY.shape[1]):
        step_logits, states = model.step(
            ops.convert_to_tensor(TARGET_IN_VOCABULARY[:, t]), states
        )[:2]  # a coverage cell's step also gives its alignments
        steps.append(N(step_logits))
    np.testing.assert_allclose(np.stack(steps, 1), logits, rtol=1e-5, atol=1e-5)
    hidden = model.rnn(
        [model.embedding(TARGET_IN_VOCABULARY), MEMORY],
        STATE,
        memory_mask=MEMORY_MASK,
    )
    if model.cell.return_alignments:
        hidden = hidden[0]
    recurrent = model.output_layer(hidden)
    np.testing.assert_allclose(N(recurrent), logits, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("copy_gate_state", ["output", "cell"])
def test_the_parallel_copy_distribution_is_the_step_by_step_one(copy_gate_state):
    model = decoder(copy=True, copy_gate_state=copy_gate_state)
    probabilities = N(
        model(TARGET_IN, MEMORY, MEMORY_MASK, initial_state=STATE, source_ids=SOURCE)
    )
    states = model.initial_search_state(MEMORY, MEMORY_MASK, STATE, SOURCE)
    steps = []
    for t in range(TARGET_IN.shape[1]):
        log_probs, states, _ = model.step(
            ops.convert_to_tensor(TARGET_IN[:, t]), states
        )
        steps.append(np.exp(N(log_probs)))
    np.testing.assert_allclose(np.stack(steps, 1), probabilities, atol=1e-6)


def test_the_copy_gate_reads_the_state_it_is_given():
    model = decoder(copy=True, copy_gate_state="cell")
    outputs = model.teacher_forced_outputs(
        TARGET_IN, MEMORY, MEMORY_MASK, initial_state=STATE
    )
    embedded = model.embedding(TARGET_IN_VOCABULARY)
    cell_outputs = model.teacher_rnn(embedded, initial_state=STATE)
    context = np.einsum("btv,bvd->btd", N(outputs.attention), MEMORY)
    w_h, w_s, w_x = (N(k) for k in model.copy.kernels)
    # By hand: See et al.'s p_gen = sigmoid(w_h c_t + w_s s_t + w_x x_t + b).
    logit = context @ w_h + N(cell_outputs) @ w_s + N(embedded) @ w_x
    expected = 1 / (1 + np.exp(-(logit + N(model.copy.bias))))
    np.testing.assert_allclose(N(outputs.copy_gate), expected, rtol=1e-5, atol=1e-6)
    hidden = model.cell.attentional_state(ops.convert_to_tensor(context), cell_outputs)
    np.testing.assert_allclose(N(outputs.hidden), N(hidden), rtol=1e-5, atol=1e-5)


def test_the_copy_gate_reads_s_t_only_beside_a_luong_cells_output():
    bahdanau = ka.BahdanauAttentionCell(
        keras.layers.GRUCell(16), ka.BahdanauAttention(8)
    )
    for cell in (luong_cell(True), bahdanau):
        with pytest.raises(ValueError, match=r"copy_gate_state='cell'.*Received"):
            ka.AttentionDecoder(
                keras.layers.Embedding(20, 8),
                cell,
                keras.layers.Dense(20),
                copy=True,
                unk_id=3,
                num_oov=5,
                copy_gate_state="cell",
            )
    with pytest.raises(ValueError, match=r"Received: copy_gate_state='state'"):
        decoder(copy=True, copy_gate_state="state")


def test_a_saved_decoder_without_input_feeding_gives_the_same_logits(tmp_path):
    inputs = keras.Input((None,), dtype="int32")
    memory = keras.Input((5, 16))
    state = keras.Input((16,))
    model = decoder()
    outputs = model(inputs, memory, initial_state=state)
    functional = keras.Model([inputs, memory, state], outputs)
    expected = N(functional([TARGET_IN_VOCABULARY, MEMORY, STATE]))
    functional.save(tmp_path / "decoder.keras")
    reloaded = keras.saving.load_model(tmp_path / "decoder.keras")
    np.testing.assert_allclose(
        N(reloaded([TARGET_IN_VOCABULARY, MEMORY, STATE])), expected, atol=1e-6
    )
    result = reloaded.layers[-1].generate(
        MEMORY, initial_state=STATE, start_id=1, end_id=2, max_length=4
    )
    assert tuple(result.ids.shape) == (3, 4)
