"""The time loop `AttentionRNN` runs itself on the torch backend.

On torch, Keras' `RNN` layer runs a Python loop too, but a generic one: it
calls the cell through `Layer.__call__` at every step, flattens and repacks
the states with `keras.tree`, masks every state (the memory's too, which no
step changes), and runs one step more than the sequence has, to learn the
output's structure. `attention_loop` calls the built cell's `call` itself,
masks only the states a step changed, and reads the memory out of the
states once (`memory_from_states`), passing it to every step. Its outputs, final
states and gradients are those of `keras.layers.RNN(cell, return_state=True)`
on the same arguments. (The wrapped cell's dropout masks are drawn before
either loop, so both read the same; with the attention's dropout in
training, Keras' extra step draws from its seed once more, so the two draw
other weight masks, from the same distribution.)

TensorFlow and JAX keep Keras' loop: there it is a `while_loop` or a
`scan`, which a Python loop would unroll into the graph.
"""

import keras
from keras import ops


def loop_calls_cell_directly(cell):
    """Whether `attention_loop` may run `cell` instead of `keras.layers.RNN`.

    `Layer.__call__` would autocast the cell's variables (mixed precision),
    cast its inputs to its dtype and add its activity regularization at every
    step; a direct `call` does none of that, so it is taken only where none
    of it applies: on torch, for a built cell whose layers all compute in
    the dtype of their variables and the cell's, and no activity
    regularizer.

    Args:
        cell: An `AttentionCellWrapper`.

    Returns:
        bool.
    """
    if keras.config.backend() != "torch" or not cell.built:
        return False
    dtype = cell.compute_dtype
    for layer in (cell, cell.cell, cell.attention):
        if not isinstance(layer, keras.layers.Layer):
            return False
        if layer.compute_dtype != dtype or layer.variable_dtype != dtype:
            return False
    return cell.activity_regularizer is None


def attention_loop(
    cell,
    sequences,
    initial_state,
    mask=None,
    training=None,
    go_backwards=False,
    return_sequences=True,
    zero_output_for_mask=False,
):
    """Runs `cell` over `sequences`, as `keras.layers.RNN` does.

    A masked step keeps the states and repeats the previous output (zeros
    before the first step, or always with `zero_output_for_mask`).

    Args:
        cell: A built `AttentionCellWrapper` (`loop_calls_cell_directly`).
        sequences: `(batch, T, input_dim)`.
        initial_state: The cell's flat initial states.
        mask: Optional boolean `(batch, T)`.
        training: Passed to the cell (`False` for None, as `keras.layers.RNN`).
        go_backwards: Process the sequence backwards (and return its outputs
            in that order, as `keras.layers.RNN`).
        return_sequences: Return every step's output or the last.
        zero_output_for_mask: Zero the outputs of masked steps.

    Returns:
        `(outputs, final_states)`: `(batch, T, output_size)` (or
        `(batch, output_size)`) and the list of final states.
    """
    training = False if training is None else training
    inputs = ops.unstack(sequences, axis=1)
    masks = [None] * len(inputs)
    if mask is not None:
        masks = ops.unstack(ops.expand_dims(ops.cast(mask, "bool"), -1), axis=1)
    if go_backwards:
        inputs, masks = inputs[::-1], masks[::-1]
    states = list(initial_state)
    outputs, previous, zeros = [], None, None
    memory = cell.memory_from_states(states)
    for step_input, step_mask in zip(inputs, masks, strict=True):
        output, new_states = cell.call(
            step_input, states, training=training, memory=memory
        )
        if step_mask is not None:
            if zeros is None:
                zeros = ops.zeros_like(output)
            held = zeros if zero_output_for_mask or previous is None else previous
            output = ops.where(step_mask, output, held)
            # A state the step returned unchanged (the memory) is kept
            # as is: `where` would give the same values, in a new tensor.
            new_states = [
                new if new is old else ops.where(step_mask, new, old)
                for new, old in zip(new_states, states, strict=True)
            ]
        states, previous = list(new_states), output
        if return_sequences:
            outputs.append(output)
    return (ops.stack(outputs, axis=1) if return_sequences else previous), states
