"""Constraints on the next token, composed in a list (the search's processors).

A processor is any callable

    processor(log_probs, history, step) -> log_probs

* `log_probs`: float32 `(N, V)`, the scores of the next token of each row.
* `history`: int32 `(N, max_length)`, the tokens each row generated so far
  (the start token excluded): column `i < step` holds token `i`, the columns
  from `step` on hold -1.
* `step`: int32 scalar, the index of the token being chosen (0-based).

It returns the constrained scores, same shape: a banned token gets `-inf`,
nothing is renormalised. The processors here also say which of any given ids
they ban (`banned(ids, history, step)`), which lets greedy search apply them
to a pointer-generator's scores left in parts (`keras_attn.pointer_scores`);
a processor without that method makes the search expand the scores first.
`keras_attn.search`'s strategies apply their list in order at every step,
under `jit` too, so a processor must be built from `keras.ops` with no
Python-side data-dependent control flow. The design is that of Hugging
Face's `LogitsProcessor`s, minus the renormalisation.
"""

from keras import ops

_NEG_INF = float("-inf")


def _columns(log_probs):
    """int32 `(1, V)`: the token id of each column of `log_probs`."""
    return ops.arange(ops.shape(log_probs)[1], dtype="int32")[None]


class LogitsProcessor:
    """Base class of the processors (subclassing it is optional)."""

    def __call__(self, log_probs, history, step):
        """Returns `log_probs` `(N, V)` with the banned tokens at `-inf`."""
        raise NotImplementedError

    def ban(self, log_probs, mask):
        """`log_probs` with `-inf` where `mask` (broadcast to `(N, V)`)."""
        return ops.where(mask, _NEG_INF, log_probs)


class MinLength(LogitsProcessor):
    """Bans `end_id` for the first `min_length` steps.

    So every hypothesis has at least `min_length` tokens before its end.

    Args:
        min_length: int scalar (Python int or tensor).
        end_id: int scalar, the end token.
    """

    def __init__(self, min_length, end_id):
        self.min_length = min_length
        self.end_id = end_id

    def __call__(self, log_probs, history, step):
        return self.ban(log_probs, self.banned(_columns(log_probs), history, step))

    def banned(self, ids, history, step):
        """bool, True where `ids` (int32 `(N, K)` or `(1, K)`) are banned."""
        return ops.logical_and(ids == self.end_id, step < self.min_length)


class MaxLength(LogitsProcessor):
    """Forces `end_id` from step `max_length` on: at most `max_length` tokens.

    The search's own `max_length` is a Python int that sizes its buffers (one
    traced graph per value); this one may be a tensor, so one graph serves
    every length up to the buffer's. A hypothesis cut this way ends with
    `end_id`, whose log-probability is scored like any other token's.

    Args:
        max_length: int scalar (Python int or tensor) >= 0.
        end_id: int scalar, the end token.
    """

    def __init__(self, max_length, end_id):
        self.max_length = max_length
        self.end_id = end_id

    def __call__(self, log_probs, history, step):
        return self.ban(log_probs, self.banned(_columns(log_probs), history, step))

    def banned(self, ids, history, step):
        """bool, True where `ids` (int32 `(N, K)` or `(1, K)`) are banned."""
        return ops.logical_and(ids != self.end_id, step >= self.max_length)


class BannedIds(LogitsProcessor):
    """Bans a fixed set of ids at every step (padding, start, unknown...).

    Args:
        ids: Sequence of ints, or int32 tensor `(K,)`.
    """

    def __init__(self, ids):
        self.ids = ids

    def __call__(self, log_probs, history, step):
        # A `(V, K)` comparison: cheaper than a scatter for a few ids.
        return self.ban(log_probs, self.banned(_columns(log_probs), history, step))

    def banned(self, ids, history, step):
        """bool, True where `ids` (int32 `(N, K)` or `(1, K)`) are banned."""
        banned_ids = ops.reshape(ops.convert_to_tensor(self.ids, "int32"), (-1,))
        return ops.any(ops.expand_dims(ids, -1) == banned_ids, axis=-1)


class NoRepeatNgram(LogitsProcessor):
    """Bans any token that would repeat an n-gram already in the hypothesis.

    The last `n - 1` tokens are compared with every earlier window of
    `n - 1` tokens; where they match, the token that followed that window is
    banned (a scatter-add of `-inf` into the scores, no `(N, V)` mask built
    from a one-hot). Cost `O(N * max_length * n)` per step.

    With `n=1` every token already generated is banned: each id appears at
    most once. A Pointer Network decoding a tour (TSP) over the input
    positions uses this as its permutation constraint.

    Args:
        n: Python int >= 1, the n-gram size.
    """

    def __init__(self, n):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"`n` must be a Python int >= 1. Received: n={n!r}")
        self.n = n

    def __call__(self, log_probs, history, step):
        found = self._followers(history, step)
        if found is None:
            return log_probs
        followers, match = found
        rows, windows = ops.shape(followers)[0], ops.shape(followers)[1]
        width = ops.shape(log_probs)[1]
        # A follower outside the scores' columns is not among them.
        match = ops.logical_and(match, followers < width)
        row_ids = ops.broadcast_to(
            ops.arange(rows, dtype="int32")[:, None], (rows, windows)
        )
        column = ops.minimum(ops.maximum(followers, 0), width - 1)
        indices = ops.stack([row_ids, column], axis=-1)
        # Adding 0 leaves a score as is and duplicates add up: no
        # order-dependent writes, whatever the backend.
        penalty = ops.where(match, _NEG_INF, 0.0)
        return ops.scatter_update(
            log_probs,
            ops.reshape(indices, (-1, 2)),
            ops.reshape(penalty, (-1,)),
            reduction="add",
        )

    def banned(self, ids, history, step):
        """bool, True where `ids` (int32 `(N, K)`) are banned."""
        found = self._followers(history, step)
        if found is None:
            return ops.zeros(ops.shape(ids), "bool")
        followers, match = found
        same = ops.expand_dims(ids, -1) == ops.expand_dims(followers, 1)
        return ops.any(ops.logical_and(same, ops.expand_dims(match, 1)), axis=-1)

    def _followers(self, history, step):
        """`(followers, match)`, int32 and bool `(N, windows)`: the token after
        each window of `n - 1` tokens, and whether that window is the current
        suffix (its follower is then banned); None if no window fits."""
        n = self.n
        length = ops.shape(history)[1]
        windows = length - n + 1
        if windows <= 0:
            return None
        # `followers[:, j]` follows the window starting at `j`; -1 when it is
        # not generated yet, which never matches a real token below.
        followers = history[:, n - 1 :]
        match = followers >= 0
        for i in range(n - 1):
            # Token `i` of the current suffix (the last `n - 1` tokens).
            suffix = ops.take(history, ops.maximum(step - (n - 1) + i, 0), axis=1)
            match = ops.logical_and(
                match, history[:, i : i + windows] == suffix[:, None]
            )
        if n > 1:
            match = ops.logical_and(match, step >= n - 1)
        return followers, match


def constraints(
    end_id, min_length=0, banned_ids=(), no_repeat_ngram_size=0, processors=()
):
    """The processors the strategies' convenience arguments stand for.

    Returns:
        A list: `MinLength`, `BannedIds` and `NoRepeatNgram` where asked for,
        then `processors`.
    """
    result = []
    if not (isinstance(min_length, int) and min_length == 0):
        result.append(MinLength(min_length, end_id))
    if not (isinstance(banned_ids, (list, tuple)) and not banned_ids):
        result.append(BannedIds(banned_ids))
    if not isinstance(no_repeat_ngram_size, int) or no_repeat_ngram_size < 0:
        raise ValueError(
            "`no_repeat_ngram_size` must be a Python int >= 0. Received: "
            f"no_repeat_ngram_size={no_repeat_ngram_size!r}"
        )
    if no_repeat_ngram_size:
        result.append(NoRepeatNgram(no_repeat_ngram_size))
    return result + list(processors or ())
