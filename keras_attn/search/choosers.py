"""How a search picks each row's next tokens.

Greedy search takes the best of the running scores (`argmax_first`); beam
and sampling search hand `SearchLoop` a `choose(candidates, log_probs,
history, t) -> indices`: candidates `(B, K * V)`, the running scores of every
extension of every beam; log_probs `(B * K, V)`, this step's processed
log-probabilities; indices int32 `(B, K)` into the candidates.
"""

import keras
from keras import ops

from keras_attn.search.processors import apply_processors

_NEG_INF = float("-inf")
_INT32_MAX = 2**31 - 1


def argmax_first(scores, ids=None):
    """Each row's maximum and the smallest id at it, as `argmax` picks ties.

    From a max and a min rather than `argmax`: under XLA on CPU, `argmax`
    is one reduction over value-index pairs, which runs more slowly than
    two plain reductions. A batch of no rows is no error.

    Args:
        scores: float `(N, W)`.
        ids: Optional int32 `(N, W)` or `(1, W)`, the id of each column (the
            smallest id among a row's maxima is taken); default: the column
            index.

    Returns:
        `(best, index)`: `(N, 1)` in the scores' dtype, and int32 `(N,)`. A
        row with no maximum (NaN) gets the last column (the largest int32
        with `ids`).
    """
    best = _row_max(scores)
    if ids is None:
        width = ops.shape(scores)[-1]
        ids, fill = ops.arange(width, dtype="int32")[None], width - 1
    else:
        fill = _INT32_MAX
    first = ops.where(scores == best, ids, fill)
    return best, _row_min(first)


def _row_max(x):
    """Each row's maximum, `(N, 1)`, for any `N` on every backend.

    TensorFlow, eager, reduces no rows only with an `initial`; Keras' torch
    reduction with one returns a single row for none, so torch reduces
    without it (a row is never empty)."""
    if keras.backend.backend() == "torch":
        return ops.amax(x, axis=-1, keepdims=True)
    return ops.max(x, axis=-1, keepdims=True, initial=_NEG_INF)


def _row_min(x):
    """Each row's minimum of an int32 `x`, `(N,)`, as `_row_max`."""
    if keras.backend.backend() == "torch":
        return ops.amin(x, axis=-1)
    return ops.min(x, axis=-1, initial=_INT32_MAX)


def top_k_chooser(k):
    def choose(candidates, log_probs, history, t):
        return ops.cast(ops.top_k(candidates, k)[1], "int32")

    return choose


def sampler(warpers, uniforms):
    """Draws each row's token from its warped log-probabilities, with
    `uniforms[t]` `(B,)` at step `t` (`uniforms`: `(max_length, B)`)."""

    def choose(candidates, log_probs, history, t):
        log_probs = apply_processors(warpers, log_probs, history, t)
        return draw(log_probs, ops.take(uniforms, t, axis=0))

    return choose


def draw(log_probs, uniforms):
    """One token per row, by inverse CDF of `uniforms` `(B,)` in [0, 1):
    int32 `(B, 1)`."""
    cdf = ops.cumsum(ops.softmax(log_probs, axis=-1), axis=-1)
    # Zero-probability tokens do not move the CDF, so they are never chosen.
    below = ops.sum(ops.cast(cdf <= (uniforms * cdf[:, -1])[:, None], "int32"), -1)
    return ops.minimum(below, ops.shape(log_probs)[1] - 1)[:, None]
