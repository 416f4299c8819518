"""A port from another library fails at the boundary, in one line.

The mistakes of a port of PyTorch's seq2seq tutorial: a score layer called
over a memory that was not tiled for the beam, `split_output` on a cell
without alignments, and one style's argument given to another style's cell.
"""

import re

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka

rng = np.random.default_rng(0)
MEMORY = rng.normal(size=(2, 5, 8)).astype("float32")
BEAM_QUERY = rng.normal(size=(6, 8)).astype("float32")
TILE_BATCH = (
    r"`query` must have the batch size of `memory`, 2 rows\. Received: "
    r"query with shape \({}\)\. .*tile the memory with "
    r"`keras_attn\.tile_batch\(memory, beam_size\)`\."
)


def own_line(excinfo):
    """The error's own line: Keras wraps an error raised in `call` in lines of
    its own; the message itself is one line."""
    lines = [line for line in str(excinfo.value).splitlines() if "Received: " in line]
    assert len(lines) == 1
    return re.sub(r"\x1b\[\d+m", "", lines[0])


SCORE_LAYERS = [
    ka.DotAttention,
    ka.GeneralAttention,
    lambda: ka.BahdanauAttention(4),
    lambda: ka.CoverageAttention(4),
]


@pytest.mark.parametrize(
    "make", SCORE_LAYERS, ids=["dot", "general", "bahdanau", "coverage"]
)
@pytest.mark.parametrize("query_shape", [(6, 8), (6, 1, 8)], ids=["step", "sequence"])
def test_a_call_over_an_untiled_memory_names_tile_batch(make, query_shape):
    layer = make()
    query = BEAM_QUERY.reshape(query_shape)
    shape = ", ".join(str(d) for d in query_shape)
    with pytest.raises(ValueError, match=TILE_BATCH.format(shape)) as e:
        layer([query, MEMORY])
    own_line(e)
    tiled = ka.tile_batch(MEMORY, 3)
    assert tuple(layer([query, tiled]).shape) == (*query_shape[:-1], 8)


def test_the_call_and_the_step_give_the_same_message():
    layer = ka.GeneralAttention()
    layer.build([(None, 8), (None, 5, 8)])
    with pytest.raises(ValueError) as called:
        layer([BEAM_QUERY, MEMORY])
    with pytest.raises(ValueError) as stepped:
        layer.step(BEAM_QUERY, layer.prepare_memory(MEMORY))
    assert own_line(called) == own_line(stepped)


def test_split_output_without_alignments_is_refused():
    cell = ka.BahdanauAttentionCell(keras.layers.GRUCell(4), ka.BahdanauAttention(4))
    with pytest.raises(
        ValueError,
        match=r"^`split_output` needs a BahdanauAttentionCell built with "
        r"`return_alignments=True`: without it the outputs hold no alignments\. "
        r"Received: return_alignments=False$",
    ):
        cell.split_output(ops.zeros((2, 4)))
    aligned = ka.BahdanauAttentionCell(
        keras.layers.GRUCell(4), ka.BahdanauAttention(4), return_alignments=True
    )
    output, alignments = aligned.split_output(ops.reshape(ops.arange(14.0), (2, 7)))
    assert ops.convert_to_numpy(alignments).tolist() == [[4, 5, 6], [11, 12, 13]]
    assert tuple(output.shape) == (2, 4)


@pytest.mark.parametrize(
    "cls, argument, takers",
    [
        (
            ka.BahdanauAttentionCell,
            {"attention_units": 8},
            'LuongAttentionCell \\(style="luong"\\) and SelfAttentionCell '
            '\\(style="self"\\)',
        ),
        (
            ka.BahdanauAttentionCell,
            {"output_attention": False},
            'LuongAttentionCell \\(style="luong"\\)',
        ),
        (
            ka.LuongAttentionCell,
            {"max_length": 3},
            'SelfAttentionCell \\(style="self"\\)',
        ),
        (
            ka.SelfAttentionCell,
            {"max_length": 3, "use_attention_layer": False},
            'LuongAttentionCell \\(style="luong"\\)',
        ),
    ],
)
def test_another_styles_argument_names_the_cell_that_takes_it(cls, argument, takers):
    name, value = list(argument.items())[-1]
    with pytest.raises(
        ValueError,
        match=f"^`{name}` is an argument of {takers}, not of {cls.__name__} "
        f'\\(style="{cls.style}"\\)\\. Received: {name}={value!r}$',
    ):
        cls(keras.layers.GRUCell(4), ka.DotAttention(), **argument)


def test_the_factory_refuses_another_styles_argument_too():
    with pytest.raises(
        ValueError,
        match=r"^`attention_units` is an argument of LuongAttentionCell .*not of "
        r'BahdanauAttentionCell \(style="bahdanau"\)\. Received: attention_units=8$',
    ):
        ka.AttentionCellWrapper(
            keras.layers.GRUCell(4), ka.DotAttention(), "bahdanau", attention_units=8
        )


def test_an_argument_of_no_style_keeps_keras_message():
    with pytest.raises(ValueError, match="Unrecognized keyword arguments"):
        ka.BahdanauAttentionCell(keras.layers.GRUCell(4), ka.DotAttention(), units=8)
