"""Greedy and beam search over any one-token decoder step, in pure TensorFlow.

The search knows nothing of the model (the design of OpenNMT-tf's
`opennmt/utils/decoding.py`): a model exposes a step function

    step_fn(ids, state, step) -> (log_probs, new_state, attention)

* `ids`: int32 `(N,)`, the previous token of each row (the start ids at step 0).
* `state`: a nested structure of tensors, each with the rows first `(N, ...)`.
* `step`: int32 scalar, the index of the token being produced (0-based).
* `log_probs`: float32 `(N, V)`; `V` may be dynamic (with a copy mechanism
  the extended vocabulary depends on the batch) but is the same at every step.
* `new_state`: the same structure, dtypes and inner shapes as `state`.
* `attention`: float32 `(N, S)`, the source attention of this step (kept for
  heatmaps); `S` is the same at every step.

Everything is graph code built from core TensorFlow ops (`tf.while_loop`,
`tf.TensorArray`, `tf.nn.top_k`, `tf.gather`, `tf.tensor_scatter_nd_min`): the
same call runs eagerly, inside a `tf.function` with a dynamic batch, and in a
SavedModel served by stock TensorFlow Serving (no `py_function`, no addons).

Output conventions (both searches return a `DecodingResult`):

* `ids` int32 `(B, T)`: the generated tokens, the start token excluded.
  `T <= max_length` is the number of steps run (the loop stops early once
  every hypothesis has ended). Positions `>= lengths[b]` hold `end_id`: the
  end token itself when the hypothesis ended, then padding.
* `lengths` int32 `(B,)`: tokens before `end_id` (the end token is not
  counted); `max_length` for a hypothesis cut off without an end token.
* `log_probs` float32 `(B,)`: the sum of the log-probabilities of the
  generated tokens, the end token included.
* `scores` float32 `(B,)`: the score used to rank hypotheses. Greedy: equal to
  `log_probs`. Beam: `log_probs / lp(n)` with GNMT's length penalty
  `lp(n) = ((5 + n) / 6) ** length_penalty`, `n` the number of scored tokens
  (`lengths + 1` when the hypothesis ended, else `max_length`);
  `length_penalty=0` gives `log_probs`.
* `attention` float32 `(B, T, S)`: the step attention of the chosen
  hypothesis; rows `>= lengths[b]` (the end step and padding) are 0.

Constraints set log-probabilities to `-inf` without renormalising: `end_id`
before `min_length` tokens, `banned_ids` (UNK, pad, start...), and, with
`no_repeat_ngram_size=n`, any token that would complete an n-gram already in
the hypothesis (the start token is not part of the history). An ended
hypothesis only continues with `end_id` at zero cost. If a row has every
token banned, the search still picks one (at `-inf`): keep constraints
satisfiable.
"""

from typing import NamedTuple

import numpy as np
import tensorflow as tf

_NEG_INF = float("-inf")


class DecodingResult(NamedTuple):
    """What `greedy_search` and `beam_search` return (see the module docstring).

    Attributes:
        ids: int32 `(B, T)`, padded with `end_id` from `lengths` on.
        lengths: int32 `(B,)`, tokens before the end token.
        scores: float32 `(B,)`, the ranking score (length-normalised for beam).
        log_probs: float32 `(B,)`, the sum of token log-probabilities.
        attention: float32 `(B, T, S)`, zero rows from `lengths` on.
    """

    ids: tf.Tensor
    lengths: tf.Tensor
    scores: tf.Tensor
    log_probs: tf.Tensor
    attention: tf.Tensor


def tile_batch(nested, beam_size):
    """Repeats each row `beam_size` times: `(B, ...)` to `(B * beam_size, ...)`.

    Rows are batch-major (row `b * beam_size + k` is beam `k` of example `b`),
    the layout `beam_search` uses. `beam_search` tiles its `initial_state`
    itself; use this for tensors a step function captures (the encoder memory),
    which need no reordering since all beams of an example share them.

    Args:
        nested: A tensor or nested structure of tensors with the batch first.
        beam_size: Python int, copies of each row.

    Returns:
        The same structure with every tensor tiled.
    """
    return tf.nest.map_structure(
        lambda t: tf.repeat(tf.convert_to_tensor(t), beam_size, axis=0), nested
    )


def greedy_search(
    step_fn,
    initial_state,
    start_ids,
    end_id,
    max_length,
    min_length=0,
    banned_ids=(),
    no_repeat_ngram_size=0,
    drop_finished=False,
):
    """Decodes the most probable token at each step.

    Args:
        step_fn: `step_fn(ids, state, step) -> (log_probs, new_state, attention)`
            (see the module docstring).
        initial_state: Nested tensors with the batch first `(B, ...)`, or None.
        start_ids: int32 `(B,)`, the first input token of each example.
        end_id: int scalar, the end token.
        max_length: int scalar >= 1, the most tokens generated (end included).
        min_length: int scalar, `end_id` is banned for the first `min_length`
            steps, so `lengths >= min_length`.
        banned_ids: Ids never generated (sequence or int32 `(K,)` tensor).
        no_repeat_ngram_size: Python int; if > 0, no n-gram of this size
            appears twice in a hypothesis.
        drop_finished: Whether rows that have ended leave the batch, so that
            later steps compute only the open ones (hypotheses end at
            different lengths). The step function then sees fewer rows than
            `B` and must read every per-row tensor from `state` (put the
            encoder memory there), not from its closure.

    Returns:
        A `DecodingResult`; `scores == log_probs`.
    """
    _check_static(max_length, no_repeat_ngram_size)
    start_ids = tf.convert_to_tensor(start_ids, tf.int32)
    end_id = tf.convert_to_tensor(end_id, tf.int32)
    state = _as_state(initial_state)
    batch = tf.shape(start_ids)[0]
    pad = max(no_repeat_ngram_size - 1, 0)
    constrain = _Constraints(end_id, min_length, banned_ids, no_repeat_ngram_size)

    def body(t, ids, state, rows, cum, finished, lengths, history, attn_ta):
        # `rows`: the example of each row the step computes, all of them
        # unless `drop_finished`.
        log_probs, new_state, attention = _call(step_fn, ids, state, t, initial_state)
        log_probs = constrain(log_probs, t, tf.gather(history, rows))
        word = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
        token = tf.gather(log_probs, word[:, None], batch_dims=1)[:, 0]
        # An ended row only continues with the end token, for free.
        open_rows = ~tf.gather(finished, rows)
        word = tf.where(open_rows, word, end_id)
        at = rows[:, None]
        cum = tf.tensor_scatter_nd_add(cum, at, tf.where(open_rows, token, 0.0))
        lengths = tf.tensor_scatter_nd_add(
            lengths, at, tf.cast(open_rows & (word != end_id), tf.int32)
        )
        ended = word == end_id
        finished = tf.tensor_scatter_nd_update(finished, at, ended)
        tokens = tf.tensor_scatter_nd_update(tf.fill([batch], end_id), at, word)
        history = tf.concat([history, tokens[:, None]], axis=1)
        attention = tf.cast(attention, tf.float32)
        attn_ta = attn_ta.write(
            t, tf.scatter_nd(at, attention, tf.stack([batch, tf.shape(attention)[1]]))
        )
        if drop_finished:
            rows, word, new_state = tf.cond(
                tf.reduce_any(ended),
                lambda: _keep_rows(tf.where(~ended)[:, 0], rows, word, new_state),
                lambda: (rows, word, new_state),
            )
        return t + 1, word, new_state, rows, cum, finished, lengths, history, attn_ta

    def cond(t, ids, state, rows, cum, finished, lengths, history, attn_ta):
        return _keep_going(t, max_length, finished)

    loop_vars = (
        tf.constant(0),
        start_ids,
        state,
        tf.range(batch),
        tf.zeros([batch], tf.float32),
        tf.zeros([batch], tf.bool),
        tf.zeros([batch], tf.int32),
        tf.fill([batch, pad], -1),
        tf.TensorArray(tf.float32, size=0, dynamic_size=True),
    )
    _, _, _, _, cum, _, lengths, history, attn_ta = tf.while_loop(
        cond, body, loop_vars, shape_invariants=_invariants(loop_vars, 7)
    )
    attention = tf.transpose(attn_ta.stack(), [1, 0, 2])
    return _finalize(history[:, pad:], lengths, cum, cum, attention, end_id)


def _keep_rows(keep, *nested):
    return tf.nest.map_structure(lambda x: tf.gather(x, keep), nested)


def beam_search(
    step_fn,
    initial_state,
    start_ids,
    end_id,
    beam_size,
    max_length,
    min_length=0,
    length_penalty=0.0,
    banned_ids=(),
    no_repeat_ngram_size=0,
):
    """Beam search, batched; returns the best hypothesis of each example.

    The step function sees `N = B * beam_size` rows, batch-major (row
    `b * beam_size + k` is beam `k` of example `b`). `initial_state` is given
    untiled, `(B, ...)`, and tiled here; after each step the new state is
    reordered with the surviving beams (`tf.gather`). Tensors the step
    function captures (the encoder memory) must be tiled by the caller with
    `tile_batch`; being the same for all beams of an example, they need no
    reordering.

    Ended hypotheses stay in the beam, frozen (they extend only with `end_id`
    at zero cost), and compete with the open ones on their normalised score;
    the loop stops when every beam has ended (or is at `-inf`) or after
    `max_length` steps. With `beam_size` at least the number of possible
    hypotheses the search is exhaustive.

    Args:
        step_fn: `step_fn(ids, state, step) -> (log_probs, new_state, attention)`.
        initial_state: Nested tensors with the batch first `(B, ...)`, or None.
        start_ids: int32 `(B,)`, the first input token of each example.
        end_id: int scalar, the end token.
        beam_size: Python int >= 1.
        max_length: int scalar >= 1, the most tokens generated (end included).
        min_length: int scalar; `end_id` is banned for the first `min_length`
            steps.
        length_penalty: GNMT's alpha: hypotheses are ranked by
            `log_probs / ((5 + n) / 6) ** alpha`, `n` the scored tokens
            (end included). 0 ranks by the raw sum; larger favours longer ones.
        banned_ids: Ids never generated (sequence or int32 `(K,)` tensor).
        no_repeat_ngram_size: Python int; if > 0, no n-gram of this size
            appears twice in a hypothesis.

    Returns:
        A `DecodingResult` for the best beam of each example; `scores` is the
        normalised score, `log_probs` the raw sum.
    """
    _check_static(max_length, no_repeat_ngram_size)
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"`beam_size` must be a Python int >= 1, got {beam_size!r}")
    k = beam_size
    start_ids = tf.convert_to_tensor(start_ids, tf.int32)
    end_id = tf.convert_to_tensor(end_id, tf.int32)
    batch = tf.shape(start_ids)[0]
    rows = batch * k
    state = tile_batch(_as_state(initial_state), k)
    pad = max(no_repeat_ngram_size - 1, 0)
    constrain = _Constraints(end_id, min_length, banned_ids, no_repeat_ngram_size)
    use_penalty = not (isinstance(length_penalty, (int, float)) and length_penalty == 0)
    alpha = tf.cast(length_penalty, tf.float32)
    # Row offset of each example's first beam, to turn beam ids into rows.
    base = tf.range(batch)[:, None] * k

    def body(t, ids, state, cum, score, finished, lengths, history, attn_ta, par_ta):
        log_probs, new_state, attention = _call(step_fn, ids, state, t, initial_state)
        log_probs = constrain(log_probs, t, history, finished)
        vocab = tf.shape(log_probs)[1]
        total = cum[:, None] + log_probs
        candidates = total
        if use_penalty:
            # Every candidate has `lengths + 1` scored tokens: an open row adds
            # one (the end token included), an ended row already has its end.
            n = tf.cast(lengths + 1, tf.float32)
            candidates = total / tf.pow((5.0 + n) / 6.0, alpha)[:, None]
        top_scores, top = tf.nn.top_k(tf.reshape(candidates, [batch, k * vocab]), k=k)
        parent = tf.reshape(base + top // vocab, [-1])
        word = tf.reshape(top % vocab, [-1])
        cum = tf.reshape(
            tf.gather(tf.reshape(total, [batch, k * vocab]), top, batch_dims=1), [-1]
        )
        was_finished = tf.gather(finished, parent)
        lengths = tf.gather(lengths, parent) + tf.cast(
            ~was_finished & (word != end_id), tf.int32
        )
        finished = was_finished | (word == end_id)
        history = tf.concat([tf.gather(history, parent), word[:, None]], axis=1)
        new_state = tf.nest.map_structure(lambda s: tf.gather(s, parent), new_state)
        attn_ta = attn_ta.write(t, tf.cast(attention, tf.float32))
        par_ta = par_ta.write(t, parent)
        score = tf.reshape(top_scores, [-1])
        return (
            t + 1,
            word,
            new_state,
            cum,
            score,
            finished,
            lengths,
            history,
            attn_ta,
            par_ta,
        )

    def cond(t, ids, state, cum, score, finished, lengths, history, attn_ta, par_ta):
        # A beam at -inf (fewer live hypotheses than beams) can never win.
        return _keep_going(t, max_length, finished | tf.math.is_inf(cum))

    # All beams start identical: only the first is live, or the first step
    # would fill the beam with copies of the same hypotheses.
    first = tf.tile(tf.constant([0.0] + [_NEG_INF] * (k - 1)), [batch])
    loop_vars = (
        tf.constant(0),
        tf.repeat(start_ids, k),
        state,
        first,
        first,
        tf.zeros([rows], tf.bool),
        tf.zeros([rows], tf.int32),
        tf.fill([rows, pad], -1),
        tf.TensorArray(tf.float32, size=0, dynamic_size=True),
        tf.TensorArray(tf.int32, size=0, dynamic_size=True),
    )
    out = tf.while_loop(
        cond, body, loop_vars, shape_invariants=_invariants(loop_vars, 7)
    )
    _, _, _, cum, score, _, lengths, history, attn_ta, par_ta = out

    best = tf.argmax(tf.reshape(score, [batch, k]), axis=1, output_type=tf.int32)
    chosen = tf.range(batch) * k + best
    # Backtrack through the parents: row_t is the row (before step t's
    # selection) whose step-t attention belongs to the chosen hypothesis.
    row_per_step = tf.scan(
        lambda row, parents: tf.gather(parents, row),
        par_ta.stack(),
        initializer=chosen,
        reverse=True,
    )
    attention = tf.gather(attn_ta.stack(), row_per_step, axis=1, batch_dims=1)
    return _finalize(
        tf.gather(history, chosen)[:, pad:],
        tf.gather(lengths, chosen),
        tf.gather(score, chosen),
        tf.gather(cum, chosen),
        tf.transpose(attention, [1, 0, 2]),
        end_id,
    )


class _Constraints:
    """Applies the bans of one step to `log_probs` `(N, V)`."""

    def __init__(self, end_id, min_length, banned_ids, ngram_size):
        self.end_id = end_id
        self.min_length = tf.convert_to_tensor(min_length, tf.int32)
        if not tf.is_tensor(banned_ids):
            banned_ids = np.asarray(banned_ids, np.int32).reshape([-1])
        self.banned = tf.reshape(tf.cast(banned_ids, tf.int32), [-1])
        self.ngram_size = ngram_size

    def __call__(self, log_probs, t, history, finished=None):
        """`log_probs` with `-inf` on every banned token of every row.

        The bans (fixed ids, the end token before `min_length`, repeated
        n-grams) are one scatter-min into the scores: `-inf` where banned,
        `+inf` (no change) elsewhere, no `(N, V)` mask. With `finished`, an
        ended row only continues with the end token, for free (a second
        pass; greedy search does without it).
        """
        log_probs = tf.cast(log_probs, tf.float32)
        rows = tf.shape(log_probs)[0]
        ids = tf.concat([self.banned, self.end_id[None]], 0)
        end_ban = tf.where(t < self.min_length, _NEG_INF, float("inf"))
        values = tf.concat([tf.fill(tf.shape(self.banned), _NEG_INF), end_ban[None]], 0)
        ids = tf.tile(ids[None], [rows, 1])
        values = tf.tile(values[None], [rows, 1])
        if self.ngram_size > 0:
            followers, banned = _repeated_ngram_bans(history, t, self.ngram_size)
            ids = tf.concat([ids, followers], 1)
            values = tf.concat([values, tf.where(banned, _NEG_INF, float("inf"))], 1)
        row_ids = tf.broadcast_to(tf.range(rows)[:, None], tf.shape(ids))
        indices = tf.reshape(tf.stack([row_ids, ids], axis=-1), [-1, 2])
        log_probs = tf.tensor_scatter_nd_min(
            log_probs, indices, tf.reshape(values, [-1])
        )
        if finished is None:
            return log_probs
        frozen = tf.where(
            tf.range(tf.shape(log_probs)[1]) == self.end_id, 0.0, _NEG_INF
        )
        return tf.where(finished[:, None], frozen[None], log_probs)


def _repeated_ngram_bans(history, t, n):
    """The tokens that would repeat an n-gram: `(followers, banned)` `(N, t)`.

    `history` is int32 `(N, n - 1 + t)`: `n - 1` left pads (-1) then the `t`
    tokens generated so far. The last `n - 1` tokens are compared with the
    first `n - 1` of every earlier window; where they match, the token that
    followed (`followers`) is `banned`. The pads make every slice valid (no
    special case for `t < n`) and never match: a window starting before the
    current suffix has a pad where the suffix has a real token. Cost
    `O(N * t * n)`; no `(N, V)` mask and no `(N, t, V)` one-hot.
    """
    match = tf.ones(tf.stack([tf.shape(history)[0], t]), tf.bool)
    for i in range(n - 1):
        match &= tf.equal(history[:, i : i + t], history[:, t + i : t + i + 1])
    return history[:, n - 1 : n - 1 + t], match  # followers: real tokens


def _finalize(ids, lengths, scores, log_probs, attention, end_id):
    positions = tf.range(tf.shape(ids)[1])[None]
    valid = positions < lengths[:, None]
    ids = tf.where(valid, ids, end_id)
    attention = attention * tf.cast(valid, tf.float32)[:, :, None]
    return DecodingResult(ids, lengths, scores, log_probs, attention)


def _keep_going(t, max_length, done):
    # Always run step 0, so an empty batch still yields well-shaped outputs.
    return (t < max_length) & ((t == 0) | ~tf.reduce_all(done))


def _as_state(initial_state):
    return () if initial_state is None else initial_state


def _call(step_fn, ids, state, t, initial_state):
    log_probs, new_state, attention = step_fn(
        ids, None if initial_state is None else state, t
    )
    return log_probs, (() if initial_state is None else new_state), attention


def _invariants(loop_vars, history_index):
    """Shape invariants: any number of rows; the token history grows."""

    def relax(x):
        if isinstance(x, tf.TensorArray):
            return tf.TensorShape(None)
        if x.shape.rank in (None, 0):
            return x.shape
        return tf.TensorShape([None]).concatenate(x.shape[1:])

    invariants = list(tf.nest.map_structure(relax, loop_vars))
    invariants[history_index] = tf.TensorShape([None, None])
    return tuple(invariants)


def _check_static(max_length, ngram_size):
    if isinstance(max_length, int) and max_length < 1:
        raise ValueError(f"`max_length` must be >= 1, got {max_length}")
    if not isinstance(ngram_size, int) or ngram_size < 0:
        raise ValueError(
            f"`no_repeat_ngram_size` must be a Python int >= 0, got {ngram_size!r}"
        )
