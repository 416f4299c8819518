"""A bidirectional RNN that computes only the rows still inside their length.

`keras.layers.Bidirectional(RNN(..., return_sequences=True,
return_state=True))` called with a padding mask runs every row for every
position of the padded batch, and masks the results. On a batch of
Gigaword sources padded to the longest one, about half of those row-steps
are padding. `bidirectional_by_length` gives the same outputs (at
inference: no dropout) with the rows sorted by length, each stage of the
recurrence running on the rows still open, the batch halved each time half
of them have ended, as `greedy_search(..., drop_finished="halves")` does
(the schedule of `keras_attn.halving`):
the shapes stay fixed, so it runs under XLA and `jax.jit`.
"""

import keras
from keras import ops

from keras_attn.halving import HALVINGS, next_stage_rows, stage_limit
from keras_attn.padding import pad_end


def bidirectional_by_length(layer, inputs, lengths):
    """`layer(inputs, mask=mask)` at inference, on the rows inside `lengths`.

    The backward direction reads each row from its own last token, as the
    masked layer does; a row's outputs past its length are zeros and its
    final states are those at its last token (zeros for an empty row).

    Args:
        layer: a `keras.layers.Bidirectional` over an RNN layer with
            `return_sequences=True`, and `merge_mode="concat"`.
        inputs: float `(batch, T, features)`, right-padded.
        lengths: int `(batch,)`: each row's tokens, in `[0, T]`.

    Returns:
        What `layer` returns: the outputs `(batch, T, 2 * units)`, or with
        `return_state=True` the list `[outputs, *forward_states,
        *backward_states]`.

    Examples:
        >>> import keras
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import bidirectional_by_length
        >>> gru = keras.layers.GRU(4, return_sequences=True)
        >>> layer = keras.layers.Bidirectional(gru)
        >>> inputs = np.random.default_rng(0).random((2, 5, 3), dtype="float32")
        >>> outputs = bidirectional_by_length(layer, inputs, np.array([5, 2], "int32"))
        >>> tuple(outputs.shape)
        (2, 5, 8)
        >>> bool(ops.convert_to_numpy(outputs)[1, 2:].any())  # past its length: zeros
        False
    """
    if not isinstance(layer, keras.layers.Bidirectional) or (
        layer.merge_mode != "concat" or not layer.return_sequences
    ):
        raise ValueError(
            "`layer` must be a `keras.layers.Bidirectional` with "
            "merge_mode='concat' over an RNN layer with return_sequences=True. "
            f"Received: layer={layer!r}"
        )
    if not layer.built:  # not inside the loops, which JAX traces
        layer.build(tuple(inputs.shape))
    lengths = ops.cast(lengths, "int32")
    # Longest first: the open rows are then a prefix of the batch at every
    # position. `restore` undoes the order, whatever it made of ties.
    order = ops.argsort(-lengths)
    lengths = ops.take(lengths, order)
    inputs = ops.take(inputs, order, axis=0)
    positions = ops.arange(ops.shape(inputs)[1], dtype="int32")
    reversed_positions = _reversed_within(positions, lengths)
    time_major = [
        ops.transpose(x, (1, 0, 2))
        for x in (inputs, ops.take_along_axis(inputs, reversed_positions[..., None], 1))
    ]
    cells = [layer.forward_layer.cell, layer.backward_layer.cell]
    outputs, states = _run_by_length(cells, time_major, lengths)
    forward, backward = (ops.transpose(x, (1, 0, 2)) for x in outputs)
    backward = ops.take_along_axis(backward, reversed_positions[..., None], 1)
    restore = ops.argsort(order)
    merged = ops.take(ops.concatenate([forward, backward], axis=-1), restore, axis=0)
    if not layer.return_state:
        return merged
    return [merged] + [
        state
        for cell, direction in zip(cells, states, strict=True)
        for state in keras.tree.pack_sequence_as(
            _state_structure(cell), [ops.take(s, restore, axis=0) for s in direction]
        )
    ]


def _reversed_within(positions, lengths):
    """`(batch, T)`: position `i < length` reads `length - 1 - i`; the padding
    reads itself."""
    inside = positions[None] < lengths[:, None]
    return ops.where(inside, lengths[:, None] - 1 - positions[None], positions[None])


def _run_by_length(cells, time_major, lengths):
    """Both directions' recurrences, one loop per stage of open rows.

    Returns `(outputs, states)`: per direction, the outputs `(T, batch,
    units)` (zeros past a row's length) and the final states (batch first).
    """
    batch = ops.shape(lengths)[0]
    steps = ops.shape(time_major[0])[0]
    states = [
        [ops.cast(s, time_major[0].dtype) for s in _initial_state(cell, batch)]
        for cell in cells
    ]
    outputs = [
        ops.zeros((steps, batch, cell.output_size), dtype=time_major[0].dtype)
        for cell in cells
    ]
    # Ended rows, in order, whose final states are known: rows [size, ...).
    ended = [[[] for _ in states[0]] for _ in cells]
    longest = ops.max(pad_end(lengths, 1))  # 0 for an empty batch
    t = ops.convert_to_tensor(0, dtype="int32")
    rows = batch
    for stage in range(HALVINGS + 1):
        half, last = stage_limit(stage, rows)
        open_lengths = lengths[:rows]

        def cond(t, states, outputs, open_lengths=open_lengths, half=half):
            still_open = ops.sum(ops.cast(open_lengths > t, "int32"))
            return ops.logical_and(t < longest, still_open > half)

        def body(t, states, outputs, open_lengths=open_lengths):
            inside = ops.expand_dims(open_lengths > t, -1)
            new_states, new_outputs = [], []
            for cell, x, state, out in zip(
                cells, time_major, states, outputs, strict=True
            ):
                step_inputs = ops.take(x, t, axis=0)[: ops.shape(state[0])[0]]
                nested = keras.tree.pack_sequence_as(_state_structure(cell), state)
                output, state_after = cell(step_inputs, nested, training=False)
                # Stacked cells nest their states: the loop carries them flat.
                state_after = keras.tree.flatten(state_after)
                new_states.append(
                    [
                        ops.where(inside, after, before)
                        for after, before in zip(state_after, state, strict=True)
                    ]
                )
                output = ops.where(inside, output, ops.zeros_like(output))
                new_outputs.append(ops.slice_update(out, (t, 0, 0), output[None]))
            return t + 1, new_states, new_outputs

        t, states, outputs = ops.while_loop(cond, body, (t, states, outputs))
        if last:
            break
        keep = next_stage_rows(half, rows)
        for d, direction in enumerate(states):
            for i, s in enumerate(direction):
                ended[d][i].append(s[keep:])
        states = [[s[:keep] for s in direction] for direction in states]
        rows = keep
    final = [
        [
            ops.concatenate([s] + list(reversed(ended[d][i])), axis=0)
            for i, s in enumerate(direction)
        ]
        for d, direction in enumerate(states)
    ]
    return outputs, final


def _initial_state(cell, batch):
    return keras.tree.flatten(cell.get_initial_state(batch))


def _state_structure(cell):
    """The nesting of `cell`'s states: `state_size` as a list."""
    size = cell.state_size
    return list(size) if isinstance(size, (list, tuple)) else [size]
