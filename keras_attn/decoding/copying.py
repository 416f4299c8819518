"""The pointer-generator of `AttentionDecoder(copy=...)`: its arguments
checked, and the extended distribution of a decoder's outputs.

With copy, the decoder's vocabulary is extended: its `V` words, then
`num_oov` slots for the source's out-of-vocabulary words (extended ids
`V + k`). The context `p_gen` reads is the attention-weighted memory
`sum_i a_i h_i` (See et al. 2017's `h*_t`), computed from the cell's
alignments, so any attention cell over a memory can copy.
"""

from keras import ops

from keras_attn.arguments import deserialize_layer
from keras_attn.copy.pointer_generator import PointerGenerator


def copy_layer(copy):
    """`copy` as a `PointerGenerator` or None, or a one-line ValueError."""
    copy = deserialize_layer(copy)
    if copy is True:
        return PointerGenerator(name="pointer_generator")
    if copy is None or copy is False:
        return None
    if not isinstance(copy, PointerGenerator):
        raise ValueError(
            f"`copy` must be True, a PointerGenerator or None. Received: copy={copy!r}"
        )
    return copy


def check_copy_arguments(output_layer, cell, num_oov, unk_id):
    """The vocabulary size `V` of a copying decoder, or a one-line ValueError.

    Args:
        output_layer: The decoder's output layer; its `units` is `V`.
        cell: The decoder's `AttentionCellWrapper`; copying reads its
            alignments, so `return_alignments` is turned on if it is not
            built yet.
        num_oov: None or a Python int >= 0.
        unk_id: A Python int in `[0, V)`.
    """
    vocab = getattr(output_layer, "units", None)
    if not isinstance(vocab, int):
        raise ValueError(
            "`output_layer` of a copying AttentionDecoder must have an int "
            "`units` (a Dense(V)): the extended vocabulary starts at V. "
            f"Received: output_layer={output_layer!r}"
        )
    if num_oov is not None and (not isinstance(num_oov, int) or num_oov < 0):
        raise ValueError(
            "`num_oov` must be None (the source's length) or an int >= 0. "
            f"Received: num_oov={num_oov!r}"
        )
    if not isinstance(unk_id, int) or not 0 <= unk_id < vocab:
        raise ValueError(
            f"`unk_id` must be an int in [0, {vocab}): a copying "
            f"AttentionDecoder embeds the extended ids it is fed (>= {vocab}) "
            "as that word. "
            f"Received: unk_id={unk_id!r}"
        )
    read_alignments(cell, "a copying AttentionDecoder")
    return vocab


def check_copy_gate_state(copy_gate_state, cell):
    """`copy_gate_state`, or a one-line ValueError: `"output"`, or `"cell"`
    (the wrapped cell's output `s_t`, which only a Luong cell without input
    feeding has beside its output in every pass)."""
    if copy_gate_state not in ("output", "cell"):
        raise ValueError(
            "`copy_gate_state` must be 'output' (the cell's output) or 'cell' "
            "(the wrapped cell's output). Received: "
            f"copy_gate_state={copy_gate_state!r}"
        )
    if copy_gate_state == "cell" and (cell.style != "luong" or cell.input_feeding):
        raise ValueError(
            "`copy_gate_state='cell'` reads the wrapped cell's output s_t "
            "beside a Luong cell's h~_t, which a Luong cell without input "
            "feeding gives; a Bahdanau cell's output is s_t already ('output'). "
            f"Received: style={cell.style!r}, "
            f"input_feeding={getattr(cell, 'input_feeding', None)!r}"
        )
    return copy_gate_state


def read_alignments(cell, reader):
    """Turns on `cell.return_alignments` for `reader` (words for the error),
    which reads the weights; a built cell without them is refused."""
    if cell.return_alignments:
        return
    if cell.built:
        raise ValueError(
            f"`return_alignments` must be True in a built cell of {reader}, "
            "which reads the attention weights. Received: return_alignments=False"
        )
    cell.return_alignments = True


def check_source_ids(source_ids, memory):
    """int32 `source_ids`, or a one-line ValueError when missing or of
    another length than the memory."""
    if source_ids is None:
        raise ValueError(
            "`source_ids` is required: AttentionDecoder(copy=...) copies from "
            "the source, whose extended ids (int (batch, Tv), out-of-vocabulary "
            "words as V + k) it needs. Received: source_ids=None"
        )
    source_ids = ops.convert_to_tensor(source_ids)
    if len(source_ids.shape) != 2 or source_ids.shape[1] not in (
        None,
        memory.shape[1],
    ):
        raise ValueError(
            "`source_ids` must have shape (batch, Tv), one id per memory "
            f"position; the memory has shape {tuple(memory.shape)}. Received: "
            f"source_ids.shape={tuple(source_ids.shape)}"
        )
    return ops.cast(source_ids, "int32")


def oov_slots(num_oov, source_ids):
    """`num_oov`, or the source's static length when it is None."""
    if num_oov is not None:
        return num_oov
    length = source_ids.shape[1]
    if length is None:
        raise ValueError(
            "`num_oov=None` takes the source's length as the number of OOV "
            "slots, which must then be static; pass `num_oov` to the decoder. "
            f"Received: source_ids.shape={tuple(source_ids.shape)}"
        )
    return int(length)


def attended_memory(attention, values):
    """`sum_i a_i h_i`: `(..., Tv)` weights over `(batch, Tv, d)` values,
    a batched matmul as the attention layers' own context."""
    attention = ops.cast(attention, values.dtype)
    if len(attention.shape) == 2:
        return ops.matmul(attention[:, None, :], values)[:, 0]
    return ops.matmul(attention, values)


def memory_values(cell, states, length):
    """The memory values `(N, Tv, memory_dim)` an attention cell's states
    carry: the second of the last three states, flattened
    (`AttentionCellWrapper`'s documented layout)."""
    flat = states[-2]
    return ops.reshape(flat, (ops.shape(flat)[0], length, cell.memory_dim))
