"""The dropout masks of the cell an `AttentionCellWrapper` wraps.

A Keras cell with `dropout` or `recurrent_dropout` (`GRUCell`, `LSTMCell`,
`SimpleRNNCell`) keeps the masks it draws at the first step on itself, so
that every step of a sequence drops the same units. `keras.layers.RNN` draws
them before its loop, for its own cell and the cells of a `StackedRNNCells`,
and clears them after; the cell inside a wrapper is neither, so it would draw
them inside the loop: inside JAX's `scan` they are tracers of the loop body
kept on the layer (an `UnexpectedTracerError`). So in training the wrapper
draws them with its initial states, before any loop, at the widths it feeds
the cell (`draw_dropout_masks`), and `AttentionRNN` clears them after its
loop (`reset_dropout_masks`): each batch gets masks of its own.
"""

import keras
from keras import ops, tree


def _output_width(cell):
    """The width of a cell's output, as `StackedRNNCells.build` reads it."""
    width = getattr(cell, "output_size", None)
    if width is None:
        width = tree.flatten(cell.state_size)[0]
    return width


def draw_dropout_masks(cell, batch_size, input_dim):
    """Draws a cell's dropout masks for one batch, replacing those it holds.

    A cell without `dropout` and `recurrent_dropout` draws nothing. The masks
    are the cell's own (`get_dropout_mask`, `get_recurrent_dropout_mask`,
    from its seed): its steps read them back instead of drawing.

    Args:
        cell: A Keras RNN cell; for a `StackedRNNCells`, each of its cells,
            each at the width of the one before's output.
        batch_size: The batch's size.
        input_dim: The width of the cell's step input.
    """
    if isinstance(cell, keras.layers.StackedRNNCells):
        for inner in cell.cells:
            draw_dropout_masks(inner, batch_size, input_dim)
            input_dim = _output_width(inner)
        return
    if not (
        hasattr(cell, "get_dropout_mask")
        and hasattr(cell, "get_recurrent_dropout_mask")
    ):
        return
    reset_dropout_masks(cell)
    dtype = cell.compute_dtype
    if getattr(cell, "dropout", 0) > 0:
        cell.get_dropout_mask(ops.zeros((batch_size, input_dim), dtype=dtype))
    if getattr(cell, "recurrent_dropout", 0) > 0:
        # The recurrent mask multiplies the first state, `h`.
        units = tree.flatten(cell.state_size)[0]
        cell.get_recurrent_dropout_mask(ops.zeros((batch_size, units), dtype=dtype))


def reset_dropout_masks(cell):
    """Clears the dropout masks a Keras cell keeps for one batch.

    Without it a `GRUCell(dropout=...)` would reuse one batch's mask on the
    next, and fail on a batch of another size. The cells of a
    `StackedRNNCells` (`cells`) are cleared too, as `keras.layers.RNN` does.

    Args:
        cell: A Keras RNN cell.
    """
    for reset in ("reset_dropout_mask", "reset_recurrent_dropout_mask"):
        getattr(cell, reset, lambda: None)()
    for inner in getattr(cell, "cells", ()):
        reset_dropout_masks(inner)
