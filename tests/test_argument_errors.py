"""Mistakes fail where they are made, in one line naming the argument.

Each error names the argument, what it must be and what it was: a vector of
lengths where a mask belongs, a mask of another length, a beam step over an
untiled memory, bad `start_ids`, logits for log-probabilities, a tensor in a
constructor, and TensorFlow Addons' argument names.
"""

import re

import keras
import numpy as np
import pytest
from backend_transforms import compile_function
from keras import ops
from one_line_errors import one_line

import keras_attn as ka

BACKEND = keras.backend.backend()
LENGTHS = np.array([3, 5], "int32")
rng = np.random.default_rng(0)
MEMORY = rng.normal(size=(2, 5, 4)).astype("float32")
QUERY = rng.normal(size=(2, 3, 4)).astype("float32")
LENGTHS_MESSAGE = re.escape(
    "not a vector of lengths; make one with `keras.ops.arange(Tv)[None] < "
    "lengths[:, None]`. Received: "
)


def _built():
    attention = ka.DotAttention()
    attention.build([(None, 4), (None, None, 4)])
    return attention


def _cell():
    return ka.AttentionCellWrapper(
        keras.layers.GRUCell(4), ka.DotAttention(), style="luong"
    )


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: ka.DotAttention()([QUERY, MEMORY], value_mask=LENGTHS), "value_mask"),
        (lambda: _built().prepare_memory(MEMORY, value_mask=LENGTHS), "value_mask"),
        (
            lambda: ka.AttentionRNN(_cell())([QUERY, MEMORY], memory_mask=LENGTHS),
            "memory_mask",
        ),
    ],
)
def test_a_lengths_vector_where_a_mask_belongs(call, name):
    with pytest.raises(
        ValueError, match=f"`{name}` must be a boolean mask of shape"
    ) as e:
        call()
    assert re.search(LENGTHS_MESSAGE + f"{name} with shape \\(2,\\)", one_line(e))


def test_a_lengths_vector_given_to_the_cell():
    cell = _cell()
    cell.build((None, 4))
    with pytest.raises(ValueError, match=LENGTHS_MESSAGE + r"memory_mask with") as e:
        cell.get_initial_state_with_memory(MEMORY, LENGTHS)
    one_line(e)


def test_a_mask_of_another_length():
    too_long = np.ones((2, 6), bool)
    expected = (
        r"`value_mask` must have the length Tv of what it masks, shape "
        r"\(batch, Tv=5\) for a tensor of shape \(2, 5, 4\). Received: "
        r"value_mask with shape \(2, 6\)"
    )
    with pytest.raises(ValueError, match=expected):
        ka.GeneralAttention()([QUERY, MEMORY], value_mask=too_long)
    with pytest.raises(ValueError, match=expected.replace("value_mask", "memory_mask")):
        ka.AttentionRNN(_cell())([QUERY, MEMORY], memory_mask=too_long)
    with pytest.raises(ValueError, match=r"`query_mask` must have the length Tq"):
        ka.DotAttention()([QUERY, MEMORY], query_mask=np.ones((2, 4), bool))


def test_mask_checks_pass_symbolic_shapes():
    sequences = keras.Input((None, 4))
    memory = keras.Input((None, 4))
    memory_mask = keras.Input((None,), dtype="bool")
    outputs = ka.AttentionRNN(_cell())([sequences, memory], memory_mask=memory_mask)
    model = keras.Model([sequences, memory, memory_mask], outputs)
    mask = np.arange(5)[None] < LENGTHS[:, None]
    assert tuple(model([QUERY, MEMORY, mask]).shape) == (2, 3, 4)


def _attending_step(memory, vocab=6):
    attention = _built()
    prepared = attention.prepare_memory(memory)
    table = ops.convert_to_tensor(rng.normal(size=(vocab, 4)).astype("float32"))

    def step(ids, state):
        context, _ = attention.step(ops.take(table, ids, axis=0), prepared)
        return ops.log_softmax(ops.matmul(context, ops.transpose(table)), -1), state

    return step


def test_a_beam_step_over_an_untiled_memory_names_tile_batch():
    step = _attending_step(MEMORY)
    with pytest.raises(
        ValueError,
        match=r"`query` must have the batch size of `memory`, 2 rows\. Received: "
        r"query with shape \(6, 4\).*keras_attn\.tile_batch\(memory, beam_size\)",
    ) as e:
        ka.beam_search(step, None, [1, 2], 0, 4, 3)
    one_line(e)
    tiled = _attending_step(ka.tile_batch(MEMORY, 3))
    assert tuple(ka.beam_search(tiled, None, [1, 2], 0, 4, 3).ids.shape) == (2, 4)


def test_a_step_that_returns_the_wrong_rows():
    def step(ids, state):  # log-probs of the examples, not of the beams
        return ops.log_softmax(ops.zeros((2, 5)), -1), state

    with pytest.raises(
        ValueError,
        match=r"`step` must return log_probs with the 6 rows of the ids it was "
        r"given \(batch \* beam_size, beam_size=3; .*tile_batch.*\)\. Received: "
        r"log_probs with shape \(2, 5\)",
    ) as e:
        ka.beam_search(step, None, [1, 2], 0, 4, 3)
    one_line(e)

    def state_step(ids, state):
        return ops.log_softmax(ops.zeros((6, 5)), -1), {"h": ops.zeros((2, 3))}

    with pytest.raises(ValueError, match=r"Received: state with shape \(2, 3\)"):
        ka.beam_search(state_step, {"h": np.zeros((2, 3))}, [1, 2], 0, 4, 3)


def _uniform_step(ids, state):
    return ops.log_softmax(ops.zeros((ops.shape(ids)[0], 5)), -1), state


@pytest.mark.parametrize(
    "start_ids, received",
    [
        (1, r"start_ids=1$"),
        (np.array([[1], [2]]), r"start_ids with shape \(2, 1\)$"),
    ],
)
@pytest.mark.parametrize("search", ["greedy", "beam", "sampling"])
def test_start_ids_of_the_wrong_shape(start_ids, received, search):
    args = (_uniform_step, None, start_ids, 0, 4)
    fn = {
        "greedy": lambda: ka.greedy_search(*args),
        "beam": lambda: ka.beam_search(*args, 2),
        "sampling": lambda: ka.sampling_search(*args, seed=0),
    }[search]
    with pytest.raises(
        ValueError,
        match=r"`start_ids` must be an int vector of shape \(batch,\), one start "
        r"token per example; for one token everywhere pass "
        r"`keras.ops.full\(\(batch,\), start_id, 'int32'\)`\. Received: " + received,
    ):
        fn()


def test_start_ids_and_initial_state_of_different_batches():
    with pytest.raises(
        ValueError,
        match=r"`start_ids` must have one id per example of `initial_state`, whose "
        r"tensors have 3 rows\. Received: start_ids with shape \(2,\)",
    ):
        ka.greedy_search(_uniform_step, {"h": np.zeros((3, 2))}, [1, 2], 0, 4)


def _logits_step(ids, state):
    rows = ops.shape(ids)[0]
    logits = ops.tile(ops.convert_to_tensor([[2.0, 1.0, 0.5, 0.0]]), (rows, 1))
    return logits, state


LOGITS_MESSAGE = re.escape(
    "`step` must return log-probabilities, each row's logsumexp 0 "
    "(`keras.ops.log_softmax(logits)`; pass `from_logits=True` for logits, "
    "`check_log_probs=False` for scores that are not). Received: log_probs "
    "whose rows' logsumexp is off by up to 2.546 at the first step"
)


@pytest.mark.parametrize(
    "search",
    [
        lambda **kw: ka.greedy_search(_logits_step, None, [1, 2], 0, 3, **kw),
        lambda **kw: ka.beam_search(_logits_step, None, [1, 2], 0, 3, 2, **kw),
        lambda **kw: ka.sampling_search(_logits_step, None, [1, 2], 0, 3, seed=0, **kw),
    ],
    ids=["greedy", "beam", "sampling"],
)
def test_logits_for_log_probabilities(search):
    with pytest.raises(ValueError, match=LOGITS_MESSAGE) as e:
        search()
    one_line(e)
    # The opt-out decodes the scores as they are: sums of logits, >= 0 here
    # where log-probabilities would sum below 0.
    result = search(check_log_probs=False)
    assert np.all(ops.convert_to_numpy(result.log_probs) >= 0)


def test_the_check_runs_eagerly_and_is_skipped_while_traced():
    def traced(starts):
        return ka.greedy_search(_logits_step, None, starts, 0, 3).ids

    compiled = compile_function(traced)
    starts = ops.convert_to_tensor([1, 2], "int32")
    if BACKEND == "torch":  # no tracing on torch: the values are checked
        with pytest.raises(ValueError, match=LOGITS_MESSAGE):
            compiled(starts)
        return
    # Under `jax.jit` or `tf.function` no values exist while tracing.
    ids = compiled(starts)
    np.testing.assert_array_equal(ops.convert_to_numpy(ids), [[0, 0, 0]] * 2)


def test_a_tensor_in_a_constructor_is_shown_by_its_shape():
    with pytest.raises(
        ValueError,
        match=r"`units` of BahdanauAttention must not be a tensor: a layer is made "
        r"from settings and takes its tensors when called\. Received: units=a "
        r"tensor of shape \(2, 5, 4\)$",
    ) as e:
        ka.BahdanauAttention(MEMORY)
    assert str(MEMORY[0, 0, 0])[:6] not in one_line(e)
    with pytest.raises(ValueError, match=r"Received: cell=a tensor of shape"):
        ka.AttentionRNN(MEMORY)


@pytest.mark.parametrize(
    "call, name, instead",
    [
        (
            lambda: ka.BahdanauAttention(8, memory=MEMORY),
            "memory",
            "BahdanauAttention takes the memory when called",
        ),
        (
            lambda: ka.GeneralAttention(memory_sequence_length=LENGTHS),
            "memory_sequence_length",
            "GeneralAttention takes a `value_mask=` of shape (batch, Tv)",
        ),
        (
            lambda: ka.GeneralAttention(scale=True),
            "scale",
            "GeneralAttention takes `use_scale=True`",
        ),
        (
            lambda: ka.AttentionCellWrapper(
                keras.layers.GRUCell(4), ka.DotAttention(), attention_layer_size=8
            ),
            "attention_layer_size",
            "AttentionCellWrapper takes `attention_units`",
        ),
        (
            lambda: ka.LuongAttentionCell(
                keras.layers.GRUCell(4), ka.DotAttention(), alignment_history=True
            ),
            "alignment_history",
            "LuongAttentionCell takes `return_alignments=True`",
        ),
        (
            lambda: ka.beam_search(_uniform_step, None, [1], 0, 4, beam_width=3),
            "beam_width",
            "beam_search takes `beam_size`",
        ),
        (
            lambda: ka.tile_batch(MEMORY, multiplier=3),
            "multiplier",
            "tile_batch takes `beam_size`",
        ),
        (
            lambda: ka.greedy_search(
                _uniform_step, None, [1], end_token=0, max_length=4
            ),
            "end_token",
            "greedy_search takes `end_id`",
        ),
    ],
)
def test_tfa_argument_names_name_the_keras_attn_one(call, name, instead):
    with pytest.raises(
        ValueError,
        match=f"`{name}` is TensorFlow Addons' argument; " + re.escape(instead),
    ) as e:
        call()
    message = one_line(e)
    assert f"Received: {name}=" in message
    if name == "memory":
        assert message.endswith("memory=a tensor of shape (2, 5, 4)")
