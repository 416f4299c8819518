"""The Keras RNN cell an attention cell wraps: its states kept flat.

`AttentionCellWrapper` keeps every state in one flat list; a wrapped cell
may nest its own (`StackedRNNCells` of `LSTMCell`s), so its states are
flattened on the way out and packed again on the way in.
"""

import keras
from keras import ops, tree


def flat_size(size):
    """A cell's `state_size` as a flat list of ints (None where unknown)."""
    return [int(s) if s is not None else None for s in tree.flatten(size)]


def flat_states(states):
    """A cell's new states as a flat list; `tree.flatten` only when nested."""
    if not isinstance(states, (list, tuple, dict)):
        return [states]
    if isinstance(states, dict) or any(
        isinstance(s, (list, tuple, dict)) for s in states
    ):
        return tree.flatten(states)
    return list(states)


def initial_cell_states(cell, sizes, batch_size, dtype):
    """The cell's own initial states (zeros by default), flat, in `dtype`."""
    init = getattr(cell, "get_initial_state", None)
    if init is not None:
        states = tree.flatten(init(batch_size=batch_size))
    else:
        states = [ops.zeros((batch_size, s)) for s in sizes]
    return [ops.cast(s, dtype) for s in states]


def calls_cell_directly(cell, dtype):
    """Whether a step may call `cell.call` itself, for a wrapper of `dtype`.

    `Layer.__call__` would only convert, autocast and build, which a built
    Keras cell of the wrapper's dtype (no mixed precision), called on the
    wrapper's tensors, does not need; on every step it costs more than a GRU
    cell's own arithmetic.
    """
    return (
        isinstance(cell, keras.layers.Layer)
        and cell.built
        and cell.compute_dtype == cell.variable_dtype == dtype
        and cell.activity_regularizer is None
    )
