"""Warpers: processors that shape the distribution sampling draws from.

Temperature, top-k and top-p (nucleus) are processors like the constraints
of `keras_attn.search.processors`, `warper(log_probs, history, step) -> log_probs`,
and compose with them in one list, as Hugging Face's `LogitsWarper`s do.
`keras_attn.sampling_search` applies the warpers of its list after all the
other processors, to what it draws from only: the scores it returns stay the
constrained log-probabilities. Greedy and beam search, which take the most
probable tokens, refuse them.
"""

from keras import ops

from keras_attn.search.processors import LogitsProcessor

_NEG_INF = float("-inf")


class LogitsWarper(LogitsProcessor):
    """Base class of the processors that shape sampling, not the scores.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import LogitsWarper
        >>> class MinP(LogitsWarper):
        ...     # Keeps the tokens at least `p` times as probable as the likeliest.
        ...     def __init__(self, p):
        ...         self.p = p
        ...     def __call__(self, log_probs, history, step):
        ...         top = ops.max(log_probs, axis=-1, keepdims=True)
        ...         kept = ops.greater_equal(log_probs, top + float(np.log(self.p)))
        ...         return ops.where(kept, log_probs, float("-inf"))
        >>> log_probs = ops.log(ops.convert_to_tensor([[0.5, 0.3, 0.15, 0.05]]))
        >>> warped = ops.convert_to_numpy(MinP(0.25)(log_probs, None, 0))
        >>> np.isfinite(warped).tolist()  # sampling_search(processors=[MinP(0.25)])
        [[True, True, True, False]]
    """


class Temperature(LogitsWarper):
    """Divides the scores by `temperature`: < 1 sharpens, > 1 flattens.

    Args:
        temperature: Positive float (or float scalar tensor).

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import Temperature
        >>> log_probs = ops.log(ops.convert_to_tensor([[0.8, 0.2]]))
        >>> warped = Temperature(0.5)(log_probs, None, 0)  # sharper
        >>> probs = ops.convert_to_numpy(ops.softmax(warped)).astype("float64")
        >>> probs.round(4).tolist()
        [[0.9412, 0.0588]]
    """

    def __init__(self, temperature):
        if isinstance(temperature, (int, float)) and temperature <= 0:
            raise ValueError(
                f"`temperature` must be positive. Received: temperature={temperature!r}"
            )
        self.temperature = temperature

    def __call__(self, log_probs, history, step):
        return log_probs / self.temperature


class TopK(LogitsWarper):
    """Keeps each row's `k` highest scores (and those tied with the last).

    Args:
        k: Python int >= 1.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import TopK
        >>> log_probs = ops.log(ops.convert_to_tensor([[0.5, 0.3, 0.15, 0.05]]))
        >>> np.isfinite(ops.convert_to_numpy(TopK(2)(log_probs, None, 0))).tolist()
        [[True, True, False, False]]
    """

    def __init__(self, k):
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"`k` must be a Python int >= 1. Received: k={k!r}")
        self.k = k

    def __call__(self, log_probs, history, step):
        kth = ops.top_k(log_probs, self.k)[0][:, -1:]
        return ops.where(log_probs < kth, _NEG_INF, log_probs)


class TopP(LogitsWarper):
    """Keeps the smallest set of most probable tokens whose probability
    reaches `p` (nucleus sampling).

    The most probable token is always kept, and the tokens tied with the
    last one kept stay too.

    Args:
        p: Float in (0, 1] (or float scalar tensor); 1 keeps every token.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import TopP
        >>> log_probs = ops.log(ops.convert_to_tensor([[0.5, 0.3, 0.15, 0.05]]))
        >>> np.isfinite(ops.convert_to_numpy(TopP(0.7)(log_probs, None, 0))).tolist()
        [[True, True, False, False]]
    """

    def __init__(self, p):
        if isinstance(p, (int, float)) and not 0 < p <= 1:
            raise ValueError(f"`p` must be in (0, 1]. Received: p={p!r}")
        self.p = p

    def __call__(self, log_probs, history, step):
        probs = ops.softmax(log_probs, axis=-1)
        ordered = ops.flip(ops.sort(probs, axis=-1), axis=-1)
        # Keep a token while the probability before it is short of `p`.
        kept = ops.cumsum(ordered, axis=-1) - ordered < self.p
        cutoff = ops.min(ops.where(kept, ordered, 2.0), axis=-1, keepdims=True)
        return ops.where(probs >= cutoff, log_probs, _NEG_INF)


def sampling_warpers(temperature=1.0, top_k=0, top_p=1.0):
    """The warpers `sampling_search`'s keyword arguments stand for.

    Returns:
        A list: `Temperature`, `TopK`, `TopP`, each unless it would keep the
        distribution as it is (1, 0 and 1 as Python numbers).
    """
    if not isinstance(top_k, int) or top_k < 0:
        raise ValueError(
            f"`top_k` must be a Python int >= 0. Received: top_k={top_k!r}"
        )
    warpers = []
    if not (isinstance(temperature, (int, float)) and temperature == 1):
        warpers.append(Temperature(temperature))
    if top_k:
        warpers.append(TopK(top_k))
    if not (isinstance(top_p, (int, float)) and top_p >= 1):
        warpers.append(TopP(top_p))
    return warpers


def split_warpers(processors):
    """`(constraints, warpers)`: `processors` apart, each in its order."""
    processors = list(processors)
    warpers = [p for p in processors if isinstance(p, LogitsWarper)]
    return [p for p in processors if not isinstance(p, LogitsWarper)], warpers
