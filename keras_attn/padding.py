"""Constant padding at the end of the last axis, without `keras.ops.pad`.

`keras.ops.pad` builds a Keras operation, with a new name, at every call,
eager ones included: under `torch.compile` each new name fails a guard, so a
search that pads compiles again at every call. `pad_end` is a concatenation,
the same values on every backend and in every export.
"""

from keras import ops


def pad_end(x, width, value=0):
    """`x` with `width` entries of `value` added at the end of its last axis.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.padding import pad_end
    >>> ops.convert_to_numpy(pad_end(np.array([[1.0, 2.0]]), 2, -1.0)).tolist()
    [[1.0, 2.0, -1.0, -1.0]]

    Args:
        x: A tensor of rank 1 or more.
        width: Python int >= 0, the entries added.
        value: The constant they hold, in `x`'s dtype.

    Returns:
        A tensor of `x`'s dtype, its last axis `width` longer.
    """
    x = ops.convert_to_tensor(x)
    if width == 0:
        return x
    leading = tuple(ops.shape(x)[:-1])
    if any(size is None for size in leading):  # a symbolic tensor: no calls
        pad_width = [[0, 0]] * len(leading) + [[0, width]]
        return ops.pad(x, pad_width, constant_values=value)
    fill = ops.full(leading + (width,), value, dtype=x.dtype)
    return ops.concatenate([x, fill], axis=-1)
