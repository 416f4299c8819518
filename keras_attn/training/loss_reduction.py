"""The reduction of a per-token loss over the valid tokens of a batch.

The losses of `keras_attn` (`pointer_generator_nll`, `coverage_loss`,
`pointer_network_nll`) compute one value per target token and reduce them
the same way here. A masked token is dropped by a select, not multiplied by
zero: its value may be `inf` or NaN (the log of a probability that
underflowed, a padding position's garbage), and `0 * inf` is NaN.
"""

from keras import ops

REDUCTIONS = ("mean", "sum", "none")


def check_reduction(reduction):
    """Raises a ValueError unless `reduction` is one of `REDUCTIONS`."""
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"`reduction` must be one of {REDUCTIONS}. Received: "
            f"reduction={reduction!r}"
        )


def reduce_masked(losses, mask=None, reduction="mean"):
    """`losses` reduced over the entries where `mask` holds.

    Args:
        losses: float `(batch, ...)`, one value per token.
        mask: Optional `(batch, ...)`, the shape of `losses`, bool or numbers;
            False or 0 marks padding. None: every entry counts.
        reduction: `"mean"` (the sum over the valid entries divided by their
            count, 0 when none is valid), `"sum"`, or `"none"` (`losses`
            with 0 at the masked entries, whatever they held).

    Returns:
        A scalar, or the shape of `losses` for `"none"`, in the losses'
        dtype.
    """
    check_reduction(reduction)
    valid = None
    if mask is not None:
        if len(mask.shape) != len(losses.shape):
            raise ValueError(
                "`mask` must have one entry per target token, shape "
                f"{tuple(losses.shape)}. Received: mask.shape={tuple(mask.shape)}"
            )
        valid = ops.cast(mask, "bool")
        losses = ops.where(valid, losses, 0.0)
    if reduction == "none":
        return losses
    total = ops.sum(losses)
    if reduction == "sum":
        return total
    if valid is None:
        count = ops.sum(ops.ones_like(losses))
    else:
        count = ops.sum(ops.cast(valid, losses.dtype))
    return total / ops.maximum(count, 1.0)
