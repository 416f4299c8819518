"""Coverage in attention cells and in `AttentionDecoder` (See et al. 2017)."""

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
TARGET_IN = np.array([[1, 4, 5, 6], [1, 7, 8, 0]], "int32")


def coverage_decoder(coverage_loss_weight=1.0, input_feeding=False):
    keras.utils.set_random_seed(2)
    cell = ka.LuongAttentionCell(
        keras.layers.GRUCell(16),
        ka.CoverageAttention(6),
        input_feeding=input_feeding,
    )
    return ka.AttentionDecoder(
        keras.layers.Embedding(10, 4, mask_zero=True),
        cell,
        keras.layers.Dense(10),
        coverage_loss_weight=coverage_loss_weight,
    )


def test_the_cell_carries_the_sum_of_its_weights():
    cell = ka.BahdanauAttentionCell(
        keras.layers.GRUCell(16), ka.CoverageAttention(6), return_alignments=True
    )
    cell.build([(None, 3), (None, 5, 8)])
    assert cell.carries_coverage
    states = cell.get_initial_state_with_memory(MEMORY, MEMORY_MASK, STATE)
    weights = []
    for inputs in RNG.random((4, 2, 3), dtype="float32"):
        output, states = cell(inputs, states)
        weights.append(N(cell.split_output(output)[1]))
    coverage = N(states[-4])
    np.testing.assert_allclose(coverage, np.sum(weights, 0), atol=1e-6)
    np.testing.assert_allclose(coverage.sum(-1), [4.0, 4.0], atol=1e-5)
    assert np.all(coverage[1, 3:] == 0)  # padding is never covered


def test_the_cells_weights_are_the_coverage_attentions_over_its_states():
    # Without input feeding, the queries are the GRU's states alone; the
    # layer's own loop over them (coverage over time) must give the weights.
    model = coverage_decoder()
    model(TARGET_IN, MEMORY, MEMORY_MASK, initial_state=STATE)
    embedded = model.embedding(TARGET_IN)
    _, alignments = model.rnn(
        [embedded, MEMORY], initial_state=STATE, memory_mask=MEMORY_MASK
    )
    queries = keras.layers.RNN(model.cell.cell, return_sequences=True)(
        embedded, initial_state=STATE, mask=TARGET_IN != 0
    )
    _, weights = model.cell.attention(
        [queries, MEMORY], value_mask=MEMORY_MASK, return_attention_scores=True
    )
    np.testing.assert_allclose(N(alignments)[0], N(weights)[0], atol=1e-6)
    np.testing.assert_allclose(N(alignments)[1, :3], N(weights)[1, :3], atol=1e-6)


def test_the_decoder_adds_the_weighted_coverage_loss():
    model = coverage_decoder(coverage_loss_weight=0.5)
    assert hasattr(model, "teacher_rnn")  # the attention carries the coverage
    model(TARGET_IN, MEMORY, MEMORY_MASK, initial_state=STATE)
    (loss,) = model.losses
    _, alignments = model.rnn(
        [model.embedding(TARGET_IN), MEMORY],
        initial_state=STATE,
        memory_mask=MEMORY_MASK,
    )
    a = N(alignments)
    covered = np.cumsum(a, axis=1) - a
    per_step = np.minimum(a, covered).sum(-1)
    valid = TARGET_IN != 0
    expected = 0.5 * per_step[valid].mean()
    np.testing.assert_allclose(float(N(loss)), expected, rtol=1e-5)
    assert expected > 0


def test_a_zero_weight_adds_no_loss():
    model = coverage_decoder(coverage_loss_weight=0)
    model(TARGET_IN, MEMORY, MEMORY_MASK, initial_state=STATE)
    assert model.losses == []


def test_fit_lowers_the_coverage_loss_with_the_rest():
    keras.utils.set_random_seed(3)
    memory = keras.Input((5, 8))
    target = keras.Input((None,), dtype="int32")
    decoder = coverage_decoder(input_feeding=True)
    model = keras.Model([target, memory], decoder(target, memory))
    model.compile(
        keras.optimizers.Adam(0.01),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    rng = np.random.default_rng(1)
    memories = rng.random((32, 5, 8), dtype="float32")
    targets = rng.integers(1, 10, (32, 4)).astype("int32")
    history = model.fit([targets, memories], targets, epochs=8, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_generate_reorders_the_coverage_with_the_rows(strategy):
    model = coverage_decoder()
    model(TARGET_IN, MEMORY, MEMORY_MASK, initial_state=STATE)
    options = dict(start_id=1, end_id=2, max_length=5, strategy=strategy)
    if strategy == "beam":
        options["beam_size"] = 3
    compiled = model.generate(MEMORY, MEMORY_MASK, STATE, **options)
    eager = model.generate(MEMORY, MEMORY_MASK, STATE, compiled=False, **options)
    np.testing.assert_array_equal(N(compiled.ids), N(eager.ids))
    # Each row's best hypothesis, replayed alone from the start: its summed
    # log-probabilities are the search's only if the search carried each
    # hypothesis's own coverage through the beam's reordering.
    states = model.initial_search_state(MEMORY, MEMORY_MASK, STATE)
    ids = N(compiled.ids)
    total = np.zeros(2)
    previous = np.full((2,), 1, "int32")
    ended = np.zeros(2, bool)
    for t in range(ids.shape[1]):
        logits, states = model.step(ops.convert_to_tensor(previous), states)[:2]
        log_probs = N(ops.log_softmax(logits, axis=-1))
        total += np.where(ended, 0.0, log_probs[np.arange(2), ids[:, t]])
        ended |= ids[:, t] == 2
        previous = ids[:, t]
    np.testing.assert_allclose(N(compiled.log_probs), total, atol=1e-4)


def test_coverage_survives_the_config():
    model = coverage_decoder(coverage_loss_weight=0.25)
    again = ka.AttentionDecoder.from_config(model.get_config())
    assert again.coverage_loss_weight == 0.25
    assert again.cell.carries_coverage


def test_a_self_attentive_cell_refuses_a_coverage_attention():
    with pytest.raises(ValueError, match=r"Received: attention="):
        ka.SelfAttentionCell(
            keras.layers.GRUCell(4), ka.CoverageAttention(4), max_length=3
        )


@pytest.mark.parametrize("weight", [-1.0, "1", None])
def test_the_coverage_loss_weight_must_be_a_number_at_least_zero(weight):
    with pytest.raises(ValueError, match=r"Received: coverage_loss_weight="):
        coverage_decoder(coverage_loss_weight=weight)
