"""Constraints on the next token, composed in a list (the search's processors).

A processor is any callable

    processor(log_probs, history, step) -> log_probs

* `log_probs`: float32 `(N, V)`, the scores of the next token of each row.
* `history`: int32 `(N, max_length)`, the tokens each row generated so far
  (the start token excluded): column `i < step` holds token `i`, the columns
  from `step` on hold -1.
* `step`: int32 scalar, the index of the token being chosen (0-based).

It returns the constrained scores, same shape; nothing is renormalised. A
processor states what it does once, by the base class it extends:

* `LogitsProcessor`: any change of the scores, in `__call__`;
* `TokenBan`: bans tokens (`-inf`), said by `banned(ids, history, step)` for
  any ids; `__call__` is derived.
* `IdBan`, a `TokenBan` that bans a few ids per row and lists them
  (`banned_ids`); `banned` and `__call__` are derived, and `apply_processors`
  bans the ids of neighbouring `IdBan`s in a single scatter: one op over the
  scores rather than one `(N, V)` pass each, which on TensorFlow's executor
  is an op of its own.
* `IdShift`: lowers the scores of a few ids per row by given amounts, said
  by `shifts(history, step, rows)`; `__call__` is derived.

`LogitsProcessor` and the processors the strategies use are in
`keras_attn`'s namespace; the bases `TokenBan`, `IdBan` and `IdShift`, for
writing a processor of one's own, are imported from `keras_attn.search.processors`.

The warpers that shape sampling (temperature, top-k, top-p) are processors
too (`keras_attn.search.warpers`). The strategies apply their list in order
at every step, under `jit` too, so a processor must be built from `keras.ops`
with no Python-side data-dependent control flow. The design is
that of Hugging Face's `LogitsProcessor`s, minus the renormalisation.
"""

import numbers

from keras import ops
from keras.backend import standardize_dtype

from keras_attn.arguments import describe
from keras_attn.padding import pad_end

_NEG_INF = float("-inf")


def _check_int_scalar(value, name):
    """Raises a one-line ValueError unless `value` is an int scalar: a Python
    int >= 0, or an int tensor of rank 0 (whose value a traced graph cannot
    check).

    Args:
        value: The argument.
        name: Its name, for the message.
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if value >= 0:
            return
    elif hasattr(value, "dtype") and len(getattr(value, "shape", (0,))) == 0:
        if standardize_dtype(value.dtype).startswith(("int", "uint")):
            return
    raise ValueError(
        f"`{name}` must be an int scalar >= 0: a Python int or an int tensor "
        f"of rank 0. Received: {name}={describe(value)}"
    )


class LogitsProcessor:
    """Base class of the processors (subclassing it is optional).

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import LogitsProcessor
        >>> class Prefer(LogitsProcessor):
        ...     # Adds `bonus` to the score of `token` at every step.
        ...     def __init__(self, token, bonus):
        ...         self.token, self.bonus = token, bonus
        ...     def __call__(self, log_probs, history, step):
        ...         columns = ops.arange(ops.shape(log_probs)[1])
        ...         bonus = ops.where(columns == self.token, self.bonus, 0.0)
        ...         return ops.add(log_probs, bonus)
        >>> scores = np.zeros((1, 4), "float32")
        >>> history = np.full((1, 3), -1, "int32")  # nothing generated yet
        >>> ops.convert_to_numpy(Prefer(3, 1.5)(scores, history, 0)).tolist()
        [[0.0, 0.0, 0.0, 1.5]]
    """

    def __call__(self, log_probs, history, step):
        """Returns the processed `log_probs` `(N, V)`."""
        raise NotImplementedError(
            f"{self.__class__.__name__} must implement `__call__`."
        )

    def ban(self, log_probs, mask):
        """`log_probs` with `-inf` where `mask` (broadcast to `(N, V)`)."""
        return ops.where(mask, _NEG_INF, log_probs)


class TokenBan(LogitsProcessor):
    """A processor that only bans tokens; subclasses implement `banned`.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn.search import TokenBan
        >>> class BanOdd(TokenBan):
        ...     # Bans the odd ids.
        ...     def banned(self, ids, history, step):
        ...         return ids % 2 == 1
        >>> scores = np.zeros((1, 4), "float32")
        >>> history = np.full((1, 3), -1, "int32")  # nothing generated yet
        >>> ops.convert_to_numpy(BanOdd()(scores, history, 0)).tolist()
        [[0.0, -inf, 0.0, -inf]]
    """

    def __call__(self, log_probs, history, step):
        columns = ops.arange(ops.shape(log_probs)[1], dtype="int32")[None]
        return self.ban(log_probs, self.banned(columns, history, step))

    def banned(self, ids, history, step):
        """Which of `ids` this step bans.

        Args:
            ids: int32 `(N, K)` or `(1, K)`.
            history, step: as the processors take them.

        Returns:
            bool, the shape of `ids` (or broadcastable to `(N, K)`).
        """
        raise NotImplementedError(f"{self.__class__.__name__} must implement `banned`.")


class IdBan(TokenBan):
    """A `TokenBan` that lists the few ids it bans in each row.

    Subclasses implement `banned_ids` only: calling the processor adds
    `-inf` to the scores of the listed ids (a scatter: no `(N, V)` mask is
    built), and `banned` compares any ids with the list.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn.search.processors import IdBan
        >>> class NoImmediateRepeat(IdBan):
        ...     # Bans the token generated at the previous step.
        ...     def banned_ids(self, history, step, rows):
        ...         last = ops.take(history, ops.maximum(step - 1, 0), axis=1)[:, None]
        ...         return last, ops.broadcast_to(step > 0, ops.shape(last))
        >>> scores = np.zeros((1, 4), "float32")
        >>> history = np.array([[3, -1, -1]], "int32")  # token 0 was 3
        >>> step = ops.convert_to_tensor(1, "int32")
        >>> ops.convert_to_numpy(NoImmediateRepeat()(scores, history, step)).tolist()
        [[0.0, 0.0, 0.0, -inf]]
    """

    def __call__(self, log_probs, history, step):
        return ban_listed(log_probs, [self], history, step)

    def banned_ids(self, history, step, rows):
        """The ids this step bans in each of `rows` rows.

        Returns:
            `(ids, mask)`, int32 and bool `(rows, K)`: the ids, and which of
            them are banned (the others are ignored); None when none is.
        """
        raise NotImplementedError(
            f"{self.__class__.__name__} must implement `banned_ids`."
        )

    def banned(self, ids, history, step):
        listed = self.banned_ids(history, step, ops.shape(ids)[0])
        if listed is None:
            return ops.zeros(ops.shape(ids), "bool")
        listed_ids, mask = listed
        same = ops.expand_dims(ids, -1) == ops.expand_dims(
            ops.cast(listed_ids, "int32"), 1
        )
        return ops.any(ops.logical_and(same, ops.expand_dims(mask, 1)), axis=-1)


def ban_listed(log_probs, processors, history, step):
    """`log_probs` `(N, V)` with the ids listed by `IdBan` `processors` at
    `-inf`, in one scatter that writes `-inf` alone: an id not banned is
    written to an extra column, dropped after, so duplicates write the same
    value and the order of the writes does not matter, whatever the backend
    (a plain scatter-update: Keras' scatter-add came in 3.14)."""
    rows, width = ops.shape(log_probs)[0], ops.shape(log_probs)[1]
    listed = [p.banned_ids(history, step, rows) for p in processors]
    listed = [found for found in listed if found is not None]
    if not listed:
        return log_probs
    ids = ops.concatenate([ops.cast(i, "int32") for i, _ in listed], axis=1)
    mask = ops.concatenate([m for _, m in listed], axis=1)
    # An id outside the scores' columns is not among them.
    mask = ops.logical_and(mask, ops.logical_and(ids >= 0, ids < width))
    row_ids = ops.zeros_like(ids) + ops.arange(rows, dtype="int32")[:, None]
    column = ops.where(mask, ids, width)
    indices = ops.reshape(ops.stack([row_ids, column], axis=-1), (-1, 2))
    padded = pad_end(log_probs, 1)
    banned = ops.full_like(indices[:, 0], _NEG_INF, dtype=log_probs.dtype)
    return ops.scatter_update(padded, indices, banned)[:, :width]


def apply_processors(processors, log_probs, history, step):
    """Applies `processors` in order, neighbouring `IdBan`s in one scatter
    (`ban_listed`)."""
    run = []
    for processor in list(processors) + [None]:
        if isinstance(processor, IdBan):
            run.append(processor)
            continue
        if run:
            log_probs = ban_listed(log_probs, run, history, step)
            run = []
        if processor is not None:
            log_probs = processor(log_probs, history, step)
    return log_probs


def _full(rows, values):
    """`values` `(K,)` repeated for `rows` rows: `(rows, K)`."""
    values = ops.reshape(ops.convert_to_tensor(values, "int32"), (1, -1))
    return ops.zeros((rows, 1), "int32") + values


class MinLength(IdBan):
    """Bans `end_id` for the first `min_length` steps.

    So every hypothesis has at least `min_length` tokens before its end.

    Args:
        min_length: int scalar (Python int or tensor) >= 0.
        end_id: int scalar >= 0, the end token.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import MinLength
        >>> scores = np.zeros((1, 4), "float32")
        >>> history = np.full((1, 3), -1, "int32")  # nothing generated yet
        >>> no_end = MinLength(2, end_id=2)
        >>> step = ops.convert_to_tensor(1, "int32")
        >>> ops.convert_to_numpy(no_end(scores, history, step)).tolist()
        [[0.0, 0.0, -inf, 0.0]]
        >>> step = ops.convert_to_tensor(2, "int32")
        >>> ops.convert_to_numpy(no_end(scores, history, step)).tolist()
        [[0.0, 0.0, 0.0, 0.0]]
    """

    def __init__(self, min_length, end_id):
        _check_int_scalar(min_length, "min_length")
        _check_int_scalar(end_id, "end_id")
        self.min_length = min_length
        self.end_id = end_id

    def banned_ids(self, history, step, rows):
        ids = _full(rows, [self.end_id])
        return ids, ops.broadcast_to(step < self.min_length, ops.shape(ids))


class MaxLength(TokenBan):
    """Forces `end_id` from step `max_length` on: at most `max_length` tokens.

    The search's own `max_length` is a Python int that sizes its buffers (one
    traced graph per value); this one may be a tensor, so one graph serves
    every length up to the buffer's. A hypothesis cut this way ends with
    `end_id`, whose log-probability is scored like any other token's.

    Args:
        max_length: int scalar (Python int or tensor) >= 0.
        end_id: int scalar >= 0, the end token.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import MaxLength
        >>> scores = np.zeros((1, 4), "float32")
        >>> history = np.full((1, 3), -1, "int32")  # nothing generated yet
        >>> cut = MaxLength(2, end_id=2)  # from step 2 on, only the end token
        >>> step = ops.convert_to_tensor(2, "int32")
        >>> ops.convert_to_numpy(cut(scores, history, step)).tolist()
        [[-inf, -inf, 0.0, -inf]]
    """

    def __init__(self, max_length, end_id):
        _check_int_scalar(max_length, "max_length")
        _check_int_scalar(end_id, "end_id")
        self.max_length = max_length
        self.end_id = end_id

    def banned(self, ids, history, step):
        return ops.logical_and(ids != self.end_id, step >= self.max_length)


class IdShift(LogitsProcessor):
    """A processor that lowers the scores of a few ids in each row.

    Subclasses implement `shifts`; `__call__` follows. Bans and shifts
    commute: a banned score stays `-inf`.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn.search.processors import IdShift
        >>> class Discourage(IdShift):
        ...     # Lowers the score of `token` by `amount` at every step.
        ...     def __init__(self, token, amount):
        ...         self.token, self.amount = token, amount
        ...     def shifts(self, history, step, rows):
        ...         ids = ops.full((rows, 1), self.token, "int32")
        ...         return ids, ops.full((rows, 1), self.amount, "float32")
        >>> scores = np.zeros((1, 4), "float32")
        >>> history = np.full((1, 3), -1, "int32")  # nothing generated yet
        >>> ops.convert_to_numpy(Discourage(1, 0.5)(scores, history, 0)).tolist()
        [[0.0, -0.5, 0.0, 0.0]]
    """

    def __call__(self, log_probs, history, step):
        rows, width = ops.shape(log_probs)[0], ops.shape(log_probs)[1]
        ids, amounts = self.shifts(history, step, rows)
        columns = ops.arange(width, dtype="int32")[None]
        lowered = shift_amounts(columns, ids, amounts, log_probs.dtype)
        return ops.subtract(log_probs, lowered)

    def shifts(self, history, step, rows):
        """The ids this step lowers in each of `rows` rows, and by how much.

        Returns:
            `(ids, amounts)`: int32 and float `(rows, K)`; a row's ids are
            distinct.
        """
        raise NotImplementedError(f"{self.__class__.__name__} must implement `shifts`.")


def shift_amounts(ids, shifted_ids, amounts, dtype):
    """What `IdShift.shifts`' `(shifted_ids, amounts)` take from each of `ids`.

    Args:
        ids: int32 `(N, W)` or `(1, W)`.
        shifted_ids, amounts: `(N, K)`, as `IdShift.shifts` returns them.
        dtype: the scores' dtype.

    Returns:
        `(N, W)` in `dtype`: an id's amount, 0 for an id not listed.
    """
    shifted_ids = ops.cast(shifted_ids, "int32")
    amounts = ops.cast(amounts, dtype)
    count = shifted_ids.shape[1]
    if not isinstance(count, int):  # K unknown when traced: one `(N, W, K)` pass
        same = ops.expand_dims(ids, -1) == ops.expand_dims(shifted_ids, 1)
        amounts = ops.expand_dims(amounts, 1)
        return ops.sum(ops.where(same, amounts, ops.zeros_like(amounts)), axis=-1)
    # A row's ids are distinct: each id gets its amount plus zeros, exactly.
    total = ops.zeros((), dtype)
    for k in range(count):
        total = total + ops.where(
            ids == shifted_ids[:, k : k + 1],
            amounts[:, k : k + 1],
            ops.zeros((), dtype),
        )
    return total


class EndPenalty(IdShift):
    """Subtracts `penalty` from `end_id`'s score at every step.

    A hypothesis then ends only where the end token leads every other token
    by more than `penalty`, so outputs run longer (a negative `penalty`
    ends them sooner). Greedy search has no length normalisation to tune;
    this is its length lever: Murray & Chiang's word reward (2018), taken
    from the end token's side. Choose `penalty` on validation data. The
    search's scores include it: an ended hypothesis's score is `penalty`
    lower than its log-probability.

    Args:
        penalty: float scalar (Python number or tensor).
        end_id: int scalar, the end token.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import EndPenalty
        >>> scores = np.zeros((1, 4), "float32")
        >>> history = np.full((1, 3), -1, "int32")  # nothing generated yet
        >>> ops.convert_to_numpy(EndPenalty(0.5, end_id=2)(scores, history, 0)).tolist()
        [[0.0, 0.0, -0.5, 0.0]]
    """

    def __init__(self, penalty, end_id):
        self.penalty = penalty
        self.end_id = end_id

    def shifts(self, history, step, rows):
        ids = _full(rows, [self.end_id])
        penalty = ops.cast(self.penalty, "float32")
        return ids, ops.zeros((rows, 1), "float32") + penalty


class BannedIds(IdBan):
    """Bans a fixed set of ids at every step (padding, start, unknown...).

    Args:
        ids: Sequence of ints, or int32 tensor `(K,)`.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import BannedIds
        >>> scores = np.zeros((1, 4), "float32")
        >>> history = np.full((1, 3), -1, "int32")  # nothing generated yet
        >>> ops.convert_to_numpy(BannedIds([0, 1])(scores, history, 0)).tolist()
        [[-inf, -inf, 0.0, 0.0]]
    """

    def __init__(self, ids):
        self.ids = ids

    def banned_ids(self, history, step, rows):
        ids = _full(rows, self.ids)
        return ids, ops.ones(ops.shape(ids), "bool")


class NoRepeatNgram(IdBan):
    """Bans any token that would repeat an n-gram already in the hypothesis.

    The last `n - 1` tokens are compared with every earlier window of
    `n - 1` tokens; where they match, the token that followed that window is
    banned (`IdBan`: a scatter of `-inf` into the scores, no `(N, V)`
    mask built from a one-hot). Cost `O(N * max_length * n)` per step.

    With `n=1` every token already generated is banned: each id appears at
    most once. A Pointer Network decoding a tour (TSP) over the input
    positions uses this as its permutation constraint.

    Args:
        n: Python int >= 1, the n-gram size.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import NoRepeatNgram
        >>> scores = np.zeros((1, 4), "float32")
        >>> history = np.array([[3, 1, 3, -1]], "int32")  # 3 1 3: 1 would repeat "3 1"
        >>> step = ops.convert_to_tensor(3, "int32")
        >>> ops.convert_to_numpy(NoRepeatNgram(2)(scores, history, step)).tolist()
        [[0.0, -inf, 0.0, 0.0]]
    """

    def __init__(self, n):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"`n` must be a Python int >= 1. Received: n={n!r}")
        self.n = n

    def banned_ids(self, history, step, rows):
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
