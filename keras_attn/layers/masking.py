"""Mask helpers shared by every attention layer.

Softmax over attention scores runs in float32 (float64 stays float64): under
`mixed_float16` a large negative mask constant would overflow to `-inf`, and a
softmax over half-precision logits loses the small weights that copy attention
needs.
"""

import keras
from keras import ops
from keras.backend import standardize_dtype

# Finite, so that a fully masked row never produces `inf - inf = nan`.
_MASK_VALUE = -1e9


def causal_mask(query_length, value_length):
    """Lower-triangular mask: query position `i` sees value positions `<= i`.

    Args:
        query_length: int, the number of query positions `Tq`.
        value_length: int, the number of value positions `Tv`.

    Returns:
        Boolean tensor of shape `(1, query_length, value_length)`.

    Examples:
        >>> from keras import ops
        >>> from keras_attn import causal_mask
        >>> ops.convert_to_numpy(causal_mask(3, 3)).astype(int).tolist()
        [[[1, 0, 0], [1, 1, 0], [1, 1, 1]]]
    """
    ones = ops.ones((1, query_length, value_length), dtype="int32")
    rows = ops.cumsum(ones, axis=-2)
    cols = ops.cumsum(ones, axis=-1)
    return ops.greater_equal(rows, cols)


def combine_masks(*masks):
    """Logical AND of the masks that are not `None` (`None` if all are)."""
    result = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        result = mask if result is None else ops.logical_and(result, mask)
    return result


def as_dtype(x, dtype):
    """`x` in `dtype`: `x` itself when it already is.

    `keras.ops.cast` to the dtype a tensor has returns it unchanged, but only
    after the op's dispatch; a step that casts a few weights and masks saves
    that on every call.

    Args:
        x: A tensor or variable.
        dtype: The dtype wanted, a name or the backend's dtype.

    Returns:
        `x`, or `keras.ops.cast(x, dtype)`.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn.layers.masking import as_dtype
        >>> x = ops.ones((2,), "float32")
        >>> as_dtype(x, "float32") is x
        True
        >>> ops.convert_to_numpy(as_dtype(x, "int32")).tolist()
        [1, 1]
    """
    if x.dtype == dtype or standardize_dtype(x.dtype) == standardize_dtype(dtype):
        return x
    return ops.cast(x, dtype)


def softmax_dtype(dtype):
    """The dtype attention weights are computed in: float32, or float64."""
    return "float64" if standardize_dtype(dtype) == "float64" else "float32"


def masked_softmax(scores, mask=None):
    """Softmax over the last axis in float32, zero where `mask` is False.

    A row whose positions are all masked gets all-zero weights (so a zero
    context), never NaN.

    Args:
        scores: Float tensor of shape `(..., Tv)`.
        mask: Optional boolean tensor broadcastable to `scores`.

    Returns:
        Tensor with the shape of `scores`: float32, or float64 for float64
        scores (never a narrowing cast).

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import masked_softmax
        >>> scores = np.zeros((2, 4), "float32")
        >>> mask = np.array([[True, True, False, False], [False] * 4])
        >>> ops.convert_to_numpy(masked_softmax(scores, mask)).tolist()
        [[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    """
    scores = as_dtype(scores, softmax_dtype(scores.dtype))
    if mask is None:
        return ops.softmax(scores, axis=-1)
    mask = as_dtype(mask, "bool")
    weights = ops.softmax(ops.where(mask, scores, _MASK_VALUE), axis=-1)
    # Multiplying by the mask zeroes fully masked rows, which the softmax
    # alone would turn into a uniform distribution over padding.
    return weights * ops.cast(mask, weights.dtype)


class _CarriedMask(keras.layers.Layer):
    """Returns the mask Keras passes to `call`: the mask `inputs` carries."""

    def call(self, inputs, mask=None):
        return mask

    def compute_mask(self, inputs, previous_mask):
        # The returned mask carries no mask of its own.
        return None


class _CarryMask(keras.layers.Layer):
    """Returns `inputs`, on which Keras sets `mask` as its Keras mask."""

    supports_masking = True

    def call(self, inputs, mask=None):
        return inputs


def _takes_attributes(x):
    # A JAX array takes no attribute: from Keras 3.6 Keras keeps its mask in a
    # table by id that only `Layer.__call__` reads and writes (Keras 3.5 keeps
    # none). TensorFlow and torch tensors, and KerasTensors, carry it as the
    # `_keras_mask` attribute, Keras' own reader in 3.5.
    return keras.backend.backend() != "jax" or isinstance(x, keras.KerasTensor)


def keras_mask(x):
    """The mask Keras attached to `x` (an `Embedding(mask_zero=True)`'s
    output, say), or None.

    `Layer.__call__` fills a layer's `mask` argument only when the call has a
    single tensor argument: with a tensor `initial_state=` or `value_mask=`
    beside the inputs it passes `mask=None`. The tensors still carry their
    masks, so the layers read them here.
    """
    if x is None:
        return None
    if _takes_attributes(x):
        return getattr(x, "_keras_mask", None)
    return _CarriedMask()(x)


def with_keras_mask(x, mask):
    """`x` carrying `mask` as its Keras mask (when `mask` is not None)."""
    if mask is None:
        return x
    if _takes_attributes(x):
        try:
            x._keras_mask = mask
        except AttributeError:
            # A NumPy array, say: Keras too leaves it without a mask.
            pass
        return x
    return _CarryMask()(x, mask=mask)


def _shape(x):
    shape = getattr(x, "shape", None)
    if shape is None:
        shape = ops.shape(ops.convert_to_tensor(x))
    return tuple(None if d is None else int(d) for d in shape)


def check_mask(mask, name, reference, length_name="Tv"):
    """Raises a one-line ValueError unless `mask` is `(batch, T)` of `reference`.

    `reference` is the masked tensor, `(batch, T, ...)`. Unknown (None)
    dimensions are not compared, so symbolic and traced shapes pass.

    Args:
        mask: The mask to check, or None (nothing to check).
        name: The argument's name, for the message.
        reference: The tensor the mask belongs to.
        length_name: What the message calls `T`.
    """
    if mask is None:
        return
    shape, ref = _shape(mask), _shape(reference)
    length = ref[1] if len(ref) > 1 else None
    expected = (
        f"(batch, {length_name}={length})" if length else f"(batch, {length_name})"
    )
    if len(shape) == 1:
        raise ValueError(
            f"`{name}` must be a boolean mask of shape {expected}, not a vector "
            f"of lengths; make one with `keras.ops.arange({length_name})[None] "
            f"< lengths[:, None]`. Received: {name} with shape {shape}"
        )
    if len(shape) != 2:
        raise ValueError(
            f"`{name}` must be a boolean mask of shape {expected}. "
            f"Received: {name} with shape {shape}"
        )
    for axis, what in ((0, "batch size"), (1, f"length {length_name}")):
        if axis < len(ref) and None not in (shape[axis], ref[axis]):
            if shape[axis] != ref[axis]:
                raise ValueError(
                    f"`{name}` must have the {what} of what it masks, shape "
                    f"{expected} for a tensor of shape {ref}. Received: "
                    f"{name} with shape {shape}"
                )
