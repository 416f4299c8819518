"""How an attention cell's memory, and its coverage, travel in its states.

Keras 3's `RNN` layer has no `constants` argument, so the encoder memory
travels in the cell's *states*: `get_initial_state_with_memory` projects the
memory once (`attention.prepare_memory`) and returns the full initial state
list; every step reads the projected keys back from the states and calls
`attention.step`, so the memory is never re-projected per step. Every state
is rank 2 `(batch, n)` (the memory is flattened), because the JAX and
PyTorch loops broadcast an input mask `(batch, 1)` against each state.

The memory's states close the list: the flattened projected keys, the
flattened values and the mask as 0/1 floats. With a coverage attention
(`CoverageAttention`, which has `coverage_step`), the coverage `(batch, Tv)`
comes just before them: the sum of the earlier steps' weights, which the
search reorders with the rows as any state.
"""

from keras import ops

from keras_attn.layers.base import AttentionMemory
from keras_attn.layers.masking import as_dtype

MEMORY_STATES = 3  # keys, values, mask


def has_coverage(attention):
    """Whether `attention` sums its weights into a coverage it scores with."""
    return hasattr(attention, "coverage_step")


def memory_state_sizes(carries_coverage):
    """The sizes of the trailing states; None: known from the memory only."""
    return [None] * (MEMORY_STATES + int(carries_coverage))


def initial_memory_states(attention, prepared, memory, dtype, carries_coverage):
    """The trailing states of a cell attending over `prepared`.

    Args:
        attention: The cell's attention layer.
        prepared: `attention.prepare_memory(memory, ...)`.
        memory: The memory values, `(batch, Tv, memory_dim)`.
        dtype: The states' dtype.
        carries_coverage: Whether the coverage leads them.
    """
    batch_size = ops.shape(memory)[0]
    coverage = []
    if carries_coverage:
        coverage = [ops.cast(attention.initial_coverage(prepared), dtype)]
    return [
        *coverage,
        ops.reshape(ops.cast(prepared.keys, dtype), (batch_size, -1)),
        ops.reshape(ops.cast(memory, dtype), (batch_size, -1)),
        ops.cast(prepared.mask, dtype),
    ]


def read_memory(states, key_dim, memory_dim):
    """The `AttentionMemory` the last three of `states` carry."""
    keys, values, mask = states[-MEMORY_STATES:]
    batch, length = ops.shape(mask)
    return AttentionMemory(
        keys=ops.reshape(keys, (batch, length, key_dim)),
        values=ops.reshape(values, (batch, length, memory_dim)),
        mask=ops.cast(mask, "bool"),
    )


def read_coverage(states):
    """The coverage before this step, of a cell that carries one."""
    return states[-MEMORY_STATES - 1]


def add_to_coverage(states, coverage, weights):
    """`states` with the coverage `coverage + weights` in its place."""
    coverage = coverage + as_dtype(weights, coverage.dtype)
    return [*states[: -MEMORY_STATES - 1], coverage, *states[-MEMORY_STATES:]]


def split_memory_states(states):
    """`(carried, memory)`: a cell's states before the memory's three, and
    those three, which no step changes (a beam search may keep them out of
    the states it reorders and join them again for each step)."""
    states = list(states)
    return states[:-MEMORY_STATES], states[-MEMORY_STATES:]
