"""The search loop's step-by-step buffers, written one row at a time.

The loop records each step in buffers laid out time-major, `(max_length, N,
...)` (the extras, the beams' parents, the beam history): step `t` writes
row `t`. A select over the whole buffer (`where`) costs in proportion to
`max_length` at every step, so each backend writes the row itself where it
can:

* JAX: `ops.slice_update` (`lax.dynamic_update_slice`), which XLA does in
  place inside a loop;
* TensorFlow: the buffers enter the loop as `tf.TensorArray`s (a list of
  rows, `write` replaces one) and leave it stacked; in a graph, the plain
  TensorFlow ops that TF Serving and the converters take. Not
  `ops.slice_update`, which is `XlaDynamicUpdateSlice` there (an XLA op the
  converters and graphs without XLA refuse), nor
  `tf.tensor_scatter_nd_update`, which copies its buffer in a loop;
* torch: `index_copy_` in place, on a copy made when the loop opens (its
  loop is Python's: the tensors are the loop's alone).

`open_buffers` before a `while_loop`, `close_buffers` after it, `write`
inside, with `opened=True`; a buffer not opened (the loops whose batch
shrinks, which reorder their buffers' rows; any, inside `writes_by_select`)
is written by a select.
"""

import contextlib
import threading

import keras
from keras import ops

# The loop's keys that hold time-major buffers.
TIME_MAJOR = ("extras", "parents", "beam_words", "beam_parents", "beam_scores")
_SELECTING = threading.local()


@contextlib.contextmanager
def writes_by_select():
    """Searches run (or traced) inside write each step by a select.

    A search records each step's extras (and beam parents, beam history) in
    buffers `(max_length, ...)`. In a TensorFlow graph it writes them as
    `tf.TensorArray`s, which TF Serving, LiteRT and OpenVINO take but
    tf2onnx does not convert (its ONNX model fails to load: "Invalid tensor
    data type 0"); on JAX by `lax.dynamic_update_slice`. Inside this
    context the searches write them, on every backend, by a `where` over
    the whole buffer instead: plain ops every converter takes, at a cost
    per step that grows with `max_length`. Only searches with extras or
    `return_beam_history=True` have such buffers. What counts is where the
    search is traced: a `tf.function` traced before keeps its trace.

    Example:
        >>> import numpy as np
        >>> import keras_attn as ka
        >>> from keras import ops
        >>> def step(ids, state):  # P(0) = 1; the extras: the ids it was given
        ...     log_probs = ops.log(ops.convert_to_tensor([[1.0, 0.0, 0.0]]))
        ...     log_probs = ops.tile(log_probs, (ops.shape(ids)[0], 1))
        ...     return log_probs, state, ops.cast(ids[:, None], "float32")
        >>> with ka.search.writes_by_select():  # as tf2onnx traces it
        ...     result = ka.greedy_search(step, None, np.array([1], "int32"), 2, 3)
        >>> ops.convert_to_numpy(result.extras).tolist()  # (B, max_length, 1)
        [[[1.0], [0.0], [0.0]]]
    """
    before = getattr(_SELECTING, "on", False)
    _SELECTING.on = True
    try:
        yield
    finally:
        _SELECTING.on = before


def _selecting():
    return getattr(_SELECTING, "on", False)


def open_buffers(loop):
    """`(loop, opened)`: `loop` (a dict) with its time-major buffers made
    writable by row, and True; inside `writes_by_select`, `(loop, False)`."""
    backend = keras.backend.backend()
    if _selecting():
        return loop, False
    opened = dict(loop)
    for key in TIME_MAJOR:
        if key not in loop:
            continue
        buffer = loop[key]
        if backend == "tensorflow":
            import tensorflow as tf

            rows = tf.TensorArray(
                buffer.dtype,
                size=buffer.shape[0],
                element_shape=buffer.shape[1:],
            )
            opened[key] = rows.unstack(buffer)
        elif backend == "torch":
            opened[key] = buffer.clone()
    return opened, True


def close_buffers(loop):
    """`loop` with its opened buffers back as tensors."""
    closed = dict(loop)
    for key in TIME_MAJOR:
        if key in loop:
            buffer = loop[key]
            if hasattr(buffer, "stack"):  # a `tf.TensorArray`
                closed[key] = buffer.stack()
    return closed


def write(buffer, t, value, opened=False):
    """`buffer` with `buffer[t] = value`, `t` a scalar tensor.

    Args:
        buffer: `(max_length, ...)`, a tensor or an opened buffer.
        t: int32 scalar tensor, in `[0, max_length)`.
        value: The row, `buffer`'s shape without its first axis.
        opened: Whether `buffer` comes from `open_buffers` (on torch, it is
            then written in place).

    Returns:
        The buffer, of `buffer`'s kind, holding `value` at `t`.
    """
    if hasattr(buffer, "stack"):  # a `tf.TensorArray`
        return buffer.write(t, value)
    backend = keras.backend.backend()
    if backend == "torch" and opened:
        value = ops.cast(value, buffer.dtype)[None]
        return buffer.index_copy_(0, ops.reshape(t, (1,)).long(), value)
    if backend == "jax" and not _selecting():
        start = (t,) + (0,) * (len(buffer.shape) - 1)
        return ops.slice_update(buffer, start, ops.cast(value, buffer.dtype)[None])
    return write_by_select(buffer, t, value)


def write_by_select(buffer, t, value):
    """`write` by a select over every row: any backend, any buffer (a
    scatter fails on an empty batch)."""
    at = ops.arange(ops.shape(buffer)[0]) == t
    return ops.where(
        ops.reshape(at, (-1,) + (1,) * (len(buffer.shape) - 1)), value[None], buffer
    )
