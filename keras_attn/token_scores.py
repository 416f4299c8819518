"""What a search asks of a step's next-token scores (`TokenScores`).

A step function returns its scores either as a float `(N, V)` tensor of
log-probabilities or as a `TokenScores`, which the search asks two things:

* `log_probs()`: the dense float32 `(N, V)` log-probabilities, which beam and
  sampling search constrain, rank and draw from;
* `argmax(processors, history, step, running)`: each row's best allowed token
  and its running total, which is all greedy search needs.

The base class answers `argmax` from `log_probs()`; a model whose scores
come in parts (a pointer-generator's, `keras_attn.PointerScores`) answers it
from the parts, without writing the `(N, V)` tensor out. The search never
needs to know which model it decodes, as OpenNMT-tf keeps its `Sampler`
apart from its `DecodingStrategy`.
"""

from keras import ops

from keras_attn.processors import apply_processors

_NEG_INF = float("-inf")
_INT32_MAX = 2**31 - 1


def argmax_first(scores, ids=None):
    """Each row's maximum and the smallest id at it, as `argmax` picks ties.

    From a max and a min rather than `argmax`: under XLA on CPU, `argmax`
    is one reduction over value-index pairs, which runs more slowly than
    two plain reductions. With `initial` values, an empty batch is no
    error.

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
    best = ops.max(scores, axis=-1, keepdims=True, initial=_NEG_INF)
    if ids is None:
        width = ops.shape(scores)[-1]
        ids, fill = ops.arange(width, dtype="int32")[None], width - 1
    else:
        fill = _INT32_MAX
    first = ops.where(scores == best, ids, fill)
    return best, ops.min(first, axis=-1, initial=_INT32_MAX)


class TokenScores:
    """A step's next-token scores, as the search asks for them.

    Subclasses implement `log_probs`; they may override `argmax` to choose
    without writing the scores out (it must pick what the default picks).
    """

    def log_probs(self):
        """float32 `(N, V)`: the log-probability of each next token."""
        raise NotImplementedError(
            f"{self.__class__.__name__} must implement `log_probs`."
        )

    def argmax(self, processors, history, step, running):
        """Each row's best allowed extension (greedy search's choice).

        Args:
            processors: the search's processors (`keras_attn.processors`).
            history, step: as the processors take them.
            running: float32 `(N,)`, each row's score so far.

        Returns:
            `(ids, totals)`: int32 `(N,)`, the first token (smallest id) of
            each row's largest `running + log_probs` after the processors,
            and that float32 `(N,)` total.
        """
        log_probs = apply_processors(processors, self.log_probs(), history, step)
        total = running[:, None] + log_probs
        _, ids = argmax_first(total)
        return ids, ops.take_along_axis(total, ids[:, None], axis=1)[:, 0]


class DenseScores(TokenScores):
    """Scores given as a tensor: the default `TokenScores`.

    Args:
        log_probs: float `(N, V)`; cast to float32.
    """

    def __init__(self, log_probs):
        self._log_probs = ops.cast(log_probs, "float32")

    def log_probs(self):
        return self._log_probs


def as_token_scores(scores):
    """`scores` as a `TokenScores`: a tensor is wrapped in `DenseScores`."""
    if isinstance(scores, TokenScores):
        return scores
    return DenseScores(scores)
