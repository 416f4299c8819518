"""The loop the search strategies share.

`SearchLoop` runs a one-token step inside `keras.ops.while_loop`s: it applies
the processors, lets a strategy's `choose` pick each row's extensions, and
records the tokens, scores and extras in fixed-size buffers. Greedy search
takes each row's best token (`choosers.argmax_first`) and may drop its ended
rows (`run_dropping_finished`, `run_halving`).
"""

from typing import Any, NamedTuple

import keras
from keras import ops

from keras_attn.arguments import refuses_tfa_names
from keras_attn.halving import HALVINGS, next_stage_rows, stage_limit
from keras_attn.layers.masking import keras_mask, with_keras_mask
from keras_attn.search.buffers import close_buffers, open_buffers, write
from keras_attn.search.checks import (
    check_ids_in_vocabulary,
    check_normalized,
    check_start_ids,
    check_step_rows,
)
from keras_attn.search.choosers import argmax_first
from keras_attn.search.processors import apply_processors

_NEG_INF = float("-inf")


class DecodingResult(NamedTuple):
    """What the strategies return (the `keras_attn.search.strategies` module docstring
    details each field).

    Attributes:
        ids: int32 `(B, max_length)`, padded with `end_id` from `lengths` on.
        lengths: int32 `(B,)`, tokens before the end token.
        scores: float32 `(B,)`, the ranking score (length-normalised for beam).
        log_probs: float32 `(B,)`, the sum of token log-probabilities.
        extras: `(B, max_length, ...)`, zero from `lengths` on; None when the
            step function returns no extras.
        beam_history: A `BeamHistory` of every step of the beam search, with
            `return_beam_history=True`; None otherwise.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> def step(ids, state):  # always ends: P(END = 2) = 1 of 3 ids
        ...     log_probs = ops.log(ops.convert_to_tensor([[0.0, 0.0, 1.0]]))
        ...     return ops.tile(log_probs, (ops.shape(ids)[0], 1)), state
        >>> result = ka.greedy_search(step, None, np.array([1, 1], "int32"), 2, 3)
        >>> ops.convert_to_numpy(result.ids).tolist()  # END, then END as padding
        [[2, 2, 2], [2, 2, 2]]
        >>> ops.convert_to_numpy(result.lengths).tolist()
        [0, 0]
        >>> ops.convert_to_numpy(result.scores).tolist(), result.extras is None
        ([0.0, 0.0], True)
    """

    ids: Any
    lengths: Any
    scores: Any
    log_probs: Any
    extras: Any
    beam_history: Any = None


class BeamHistory(NamedTuple):
    """Every beam at every step, as TFA's `BeamSearchDecoderOutput`.

    Beam `k` of example `b` at step `t` extended beam `parent_ids[b, t, k]`
    of step `t - 1` with token `predicted_ids[b, t, k]`; following the
    parents back from the last step gives each beam's tokens (TFA's
    `gather_tree`). Steps after the search stopped hold `end_id`, the beam
    itself as parent and its final score.

    Attributes:
        predicted_ids: int32 `(B, max_length, beam_size)`, the token each
            beam chose at each step.
        parent_ids: int32 `(B, max_length, beam_size)`, in `[0, beam_size)`:
            the beam of the step before that each beam extended.
        scores: float32 `(B, max_length, beam_size)`, each beam's ranking
            score after the step (length-normalised, as `scores`).
    """

    predicted_ids: Any
    parent_ids: Any
    scores: Any


@refuses_tfa_names("tile_batch")
def tile_batch(nested, beam_size):
    """Repeats each row `beam_size` times: `(B, ...)` to `(B * beam_size, ...)`.

    Rows are batch-major (row `b * beam_size + k` is beam `k` of example `b`),
    the layout `beam_search` uses. `beam_search` tiles its `initial_state`
    itself; use this for tensors a step function captures (the encoder
    memory), which need no reordering since all beams of an example share them.

    Args:
        nested: A tensor or nested structure of tensors with the batch first.
        beam_size: Python int, copies of each row.

    Returns:
        The same structure with every tensor tiled; a tensor that carries a
        Keras mask (`Embedding(mask_zero=True)` upstream) keeps it, tiled.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> from keras_attn import tile_batch
        >>> memory = np.array([[1.0, 2.0], [3.0, 4.0]], "float32")  # (B, ...), B = 2
        >>> ops.convert_to_numpy(tile_batch(memory, 2)).tolist()  # (B * beam_size, ...)
        [[1.0, 2.0], [1.0, 2.0], [3.0, 4.0], [3.0, 4.0]]
        >>> state = {"h": np.zeros((2, 8), "float32"), "mask": np.ones((2, 5), bool)}
        >>> {name: tuple(x.shape) for name, x in tile_batch(state, 3).items()}
        {'h': (6, 8), 'mask': (6, 5)}
    """

    def tile(t):
        mask = keras_mask(t)
        tiled = ops.repeat(ops.convert_to_tensor(t), beam_size, axis=0)
        if mask is not None:
            mask = ops.repeat(mask, beam_size, axis=0)
        return with_keras_mask(tiled, mask)

    return keras.tree.map_structure(tile, nested)


class SearchLoop:
    """The loop all strategies share; they differ in `choose` (None: greedy,
    each row's best token)."""

    def __init__(
        self,
        step,
        end_id,
        max_length,
        processors,
        beam_size=1,
        length_penalty=0.0,
        num_hypotheses=1,
        check_log_probs=True,
        beam_history=False,
        stop_ids=(),
    ):
        if not isinstance(max_length, int) or max_length < 1:
            raise ValueError(
                "`max_length` must be a Python int >= 1 (it sizes the "
                f"buffers). Received: max_length={max_length!r}"
            )
        self.step = step
        self.end_id = end_id
        self.max_length = max_length
        self.processors = processors
        self.beam_size = beam_size
        self.use_penalty = not (
            isinstance(length_penalty, (int, float)) and length_penalty == 0
        )
        self.length_penalty = length_penalty
        self.num_hypotheses = num_hypotheses
        self.check_log_probs = check_log_probs
        self.beam_history = beam_history
        self.stop_ids = tuple(stop_ids)
        # Whether the loop's time-major buffers are opened (`buffers`).
        self.opened = False

    def run(self, initial_state, start_ids, choose=None):
        loop, batch, first = self._start(initial_state, start_ids)
        loop, self.opened = open_buffers(loop)
        loop = self._advance(loop, *first, choose, batch)

        def cond(loop):
            done = ops.logical_or(loop["finished"], ops.isinf(loop["cum"]))
            more = loop["t"] < self.max_length
            return ops.logical_and(more, ops.logical_not(ops.all(done)))

        def body(loop):
            log_probs, state, extras = self._call_step(loop["ids"], loop["state"])
            return (self._advance(loop, log_probs, state, extras, choose, batch),)

        (loop,) = ops.while_loop(cond, body, (loop,))
        self.opened = False
        return self._finalize(close_buffers(loop), batch)

    def run_dropping_finished(self, initial_state, start_ids):
        """Greedy `run` whose batch holds only the open rows (`drop_finished`).

        `loop` is `run`'s loop over the open rows, plus `rows`, their index in
        the batch. Ended rows are moved to `out`, `run`'s buffers for the
        whole batch (the extras batch-first, for the scatter), each time some
        end.
        """
        if keras.backend.backend() == "jax":
            raise ValueError(
                "`drop_finished=True` needs loops whose shapes may change "
                "(TensorFlow, torch); JAX's keep them fixed. Received: "
                "backend='jax'"
            )
        loop, out, batch = self._start_with_buffers(initial_state, start_ids)
        loop, out = self._drop_ended(loop, out)

        def cond(loop, out):
            open_rows = ops.shape(loop["ids"])[0]
            return ops.logical_and(loop["t"] < self.max_length, open_rows > 0)

        def body(loop, out):
            log_probs, state, extras = self._call_step(loop["ids"], loop["state"])
            loop = self._advance(loop, log_probs, state, extras, None, -1)
            return self._drop_ended(loop, out)

        loop, out = ops.while_loop(cond, body, (loop, out))
        # Rows cut off at `max_length` are still open.
        loop = dict(loop, finished=ops.ones_like(loop["finished"]))
        _, out = self._drop_ended(loop, out)
        if "extras" in out:
            out["extras"] = _swap_first_axes(out["extras"])
        return self._finalize(out, batch)

    def run_halving(self, initial_state, start_ids):
        """Greedy `run` whose batch is halved when half its rows have ended.

        Each stage is a loop of fixed shapes that runs while more than half
        its rows are open; then every row is written to `out` (an open one
        is written again when it ends) and the open rows, first, fill a batch
        half the size (the schedule of `keras_attn.halving`).
        """
        loop, out, batch = self._start_with_buffers(initial_state, start_ids)

        def body(loop):
            log_probs, state, extras = self._call_step(loop["ids"], loop["state"])
            return (self._advance(loop, log_probs, state, extras, None, -1),)

        for stage in range(HALVINGS + 1):
            rows = ops.shape(loop["ids"])[0]
            half, last = stage_limit(stage, rows)

            def cond(loop, half=half):
                open_rows = ops.sum(
                    ops.cast(ops.logical_not(loop["finished"]), "int32")
                )
                return ops.logical_and(loop["t"] < self.max_length, open_rows > half)

            loop, self.opened = open_buffers(loop)
            (loop,) = ops.while_loop(cond, body, (loop,))
            loop, self.opened = close_buffers(loop), False
            out = _scatter_rows(out, loop, ops.arange(rows))
            if last:
                break
            # Open rows first; `half` of them at most, unless `t` ran out.
            order = ops.argsort(ops.cast(loop["finished"], "int32"))
            loop = _take_rows(
                loop, ops.take(order, ops.arange(next_stage_rows(half, rows)))
            )
        if "extras" in out:
            out["extras"] = _swap_first_axes(out["extras"])
        return self._finalize(out, batch)

    def _start_with_buffers(self, initial_state, start_ids):
        """`run`'s loop after step 0, plus `rows` (each row's index in the
        batch), and `out`: the whole batch's buffers, batch-first."""
        loop, batch, first = self._start(initial_state, start_ids)
        loop["rows"] = ops.arange(batch, dtype="int32")
        out = {key: loop[key] for key in _MOVED}
        if "extras" in loop:
            out["extras"] = _swap_first_axes(loop["extras"])
        return self._advance(loop, *first, None, -1), out, batch

    def _drop_ended(self, loop, out):
        """Moves the ended rows of `loop` into `out` (when any has ended)."""

        def drop(loop, out):
            gone = ops.nonzero(loop["finished"])[0]
            kept = ops.nonzero(ops.logical_not(loop["finished"]))[0]
            return _take_rows(loop, kept), _scatter_rows(out, loop, gone)

        return ops.cond(
            ops.any(loop["finished"]), lambda: drop(loop, out), lambda: (loop, out)
        )

    def _start(self, initial_state, start_ids):
        """The loop's variables, step 0's `(log_probs, state, extras)`, batch.

        Step 0 runs outside the loop: it gives the shape of the extras'
        buffer.
        """
        k, length = self.beam_size, self.max_length
        start_ids = check_start_ids(start_ids, initial_state)
        batch = ops.shape(start_ids)[0]
        rows = batch * k
        self.has_state = initial_state is not None
        state = tile_batch(initial_state, k) if self.has_state else ()
        if k > 1:
            # All beams start identical: only the first is live, or the first
            # step would fill the beam with copies of the same hypotheses.
            first = ops.where(ops.arange(rows) % k == 0, 0.0, _NEG_INF)
        else:
            first = ops.zeros((rows,))
        loop = {
            "t": ops.convert_to_tensor(0, "int32"),
            "ids": ops.repeat(start_ids, k, axis=0),
            "state": state,
            "cum": first,
            "score": first,
            "finished": ops.zeros((rows,), "bool"),
            "lengths": ops.zeros((rows,), "int32"),
            "history": ops.full((rows, length), -1, "int32"),
        }
        if self.beam_history:
            loop["beam_words"] = ops.full((length, rows), self.end_id, "int32")
            beams = ops.arange(rows, dtype="int32") % k
            loop["beam_parents"] = ops.broadcast_to(beams[None], (length, rows))
            loop["beam_scores"] = ops.zeros((length, rows))
        log_probs, state, extras = self._call_step(loop["ids"], loop["state"])
        check_ids_in_vocabulary(self.end_id, self.stop_ids, log_probs.shape[-1])
        if self.check_log_probs:
            check_normalized(log_probs, self.step_dtype)
        if extras is not None:
            loop["extras"] = ops.zeros(
                (length,) + tuple(ops.shape(extras)), extras.dtype
            )
            if k > 1:
                # Which row (before each step's reordering) each row came from.
                loop["parents"] = ops.broadcast_to(
                    ops.arange(rows, dtype="int32")[None], (length, rows)
                )
        return loop, batch, (log_probs, state, extras)

    def _call_step(self, ids, state):
        """`(log_probs, state, extras)`: the step's float32 scores, its state
        (`()` without one) and its extras (None without)."""
        out = self.step(ids, state if self.has_state else None)
        if len(out) not in (2, 3):
            raise ValueError(
                "`step` must return `(log_probs, state)` or `(log_probs, state, "
                f"extras)`. Received {len(out)} outputs."
            )
        rows = ids.shape[0]
        check_step_rows(out[0], out[1] if self.has_state else (), rows, self.beam_size)
        self.step_dtype = out[0].dtype
        return (
            ops.cast(out[0], "float32"),
            (out[1] if self.has_state else ()),
            (out[2] if len(out) == 3 else None),
        )

    def _advance(self, loop, log_probs, state, extras, choose, batch):
        """Constrains, chooses, and records step `loop["t"]`."""
        k, t, history = self.beam_size, loop["t"], loop["history"]
        log_probs = apply_processors(self.processors, log_probs, history, t)
        if choose is None:
            total = loop["cum"][:, None] + log_probs
            _, word = argmax_first(total)
            cum = ops.take_along_axis(total, word[:, None], axis=1)[:, 0]
            return self._record(loop, word, cum, cum, None, state, extras)
        vocab = ops.shape(log_probs)[1]
        if k > 1:
            # An ended row only continues with the end token, for free: in the
            # scores, so that it competes with its siblings' extensions.
            frozen = ops.where(ops.arange(vocab) == self.end_id, 0.0, _NEG_INF)
            log_probs = ops.where(loop["finished"][:, None], frozen[None], log_probs)
        total = loop["cum"][:, None] + log_probs
        candidates = total
        if self.use_penalty:
            # Every candidate has `lengths + 1` scored tokens: an open row
            # adds one (the end token included), an ended row has its end.
            n = ops.cast(loop["lengths"] + 1, "float32")
            penalty = ops.power((5.0 + n) / 6.0, self.length_penalty)
            candidates = total / penalty[:, None]
        candidates = ops.reshape(candidates, (batch, k * vocab))
        top = choose(candidates, log_probs, history, t)
        word = top % vocab
        cum = ops.take_along_axis(ops.reshape(total, (batch, k * vocab)), top, 1)
        score = ops.take_along_axis(candidates, top, axis=1)
        word, cum, score = (ops.reshape(x, (-1,)) for x in (word, cum, score))
        parent = None
        if k > 1:
            parent = ops.reshape(
                ops.arange(batch, dtype="int32")[:, None] * k + top // vocab, (-1,)
            )
        return self._record(loop, word, cum, score, parent, state, extras)

    def _record(self, loop, word, cum, score, parent, state, extras):
        """The loop after step `loop["t"]` chose `word` (`(N,)` each; `parent`:
        the row each beam extends, None for one beam)."""
        k, t = self.beam_size, loop["t"]
        finished, lengths, history = loop["finished"], loop["lengths"], loop["history"]
        if k == 1:
            # The same on the `(B,)` vectors, without a pass over the scores.
            word = ops.where(finished, ops.cast(self.end_id, "int32"), word)
            cum = ops.where(finished, loop["cum"], cum)
            score = ops.where(finished, loop["score"], score)
        new = dict(loop, t=t + 1, cum=cum, score=score)
        if k > 1:
            finished = ops.take(finished, parent, axis=0)
            lengths = ops.take(lengths, parent, axis=0)
            history = ops.take(history, parent, axis=0)
            state = keras.tree.map_structure(
                lambda s: ops.take(s, parent, axis=0), state
            )
            if extras is not None:
                new["parents"] = self._write(loop["parents"], t, parent)
        is_end = self._ends(word)
        new["lengths"] = lengths + ops.cast(
            ops.logical_and(ops.logical_not(finished), ops.logical_not(is_end)),
            "int32",
        )
        new["finished"] = ops.logical_or(finished, is_end)
        # Batch-major, as the processors read it: a select on every backend
        # (docs/history.md, "Decoding speed", says why not a column update).
        column = ops.arange(self.max_length)[None] == t
        new["history"] = ops.where(column, word[:, None], history)
        new["ids"], new["state"] = word, state
        if "beam_words" in loop:
            beam = ops.arange(ops.shape(word)[0], dtype="int32") if k == 1 else parent
            new["beam_words"] = self._write(loop["beam_words"], t, word)
            new["beam_parents"] = self._write(loop["beam_parents"], t, beam % k)
            new["beam_scores"] = self._write(loop["beam_scores"], t, new["score"])
        if extras is not None:
            extras = ops.cast(extras, loop["extras"].dtype)
            new["extras"] = self._write(loop["extras"], t, extras)
        return new

    def _ends(self, word):
        """Whether each token of `word` ends its row: the end or a stop id."""
        ends = [word == i for i in (self.end_id, *self.stop_ids)]
        return ends[0] if len(ends) == 1 else ops.any(ops.stack(ends), axis=0)

    def _write(self, buffer, t, value):
        return write(buffer, t, value, opened=self.opened)

    def _finalize(self, loop, batch):
        k, length, n = self.beam_size, self.max_length, self.num_hypotheses
        scores = ops.reshape(loop["score"], (batch, k))
        if n == 1:
            # Not `ops.argmax`: on TensorFlow it bit-casts the floats to
            # tell -0.0 from 0.0, ops neither ONNX nor LiteRT's builtins hold.
            best = argmax_first(scores)[1]
            chosen = ops.arange(batch, dtype="int32") * k + best
        else:  # The n best of each example, best first: rows `b * n + i`.
            _, best = ops.top_k(scores, n)
            rows = ops.arange(batch, dtype="int32")[:, None] * k
            chosen = ops.reshape(rows + ops.cast(best, "int32"), (-1,))
        lengths = ops.take(loop["lengths"], chosen, axis=0)
        valid = ops.arange(length)[None] < lengths[:, None]
        history = ops.take(loop["history"], chosen, axis=0)
        # The token that ended a row stays (a stop id); `end_id` pads after it.
        at_end = ops.arange(length)[None] == lengths[:, None]
        kept = ops.logical_or(valid, ops.logical_and(at_end, self._ends(history)))
        ids = ops.where(kept, history, self.end_id)
        extras = None
        if "extras" in loop:
            extras = self._chosen_extras(loop, chosen)
            mask = ops.reshape(valid, ops.shape(valid) + (1,) * (len(extras.shape) - 2))
            extras = extras * ops.cast(mask, extras.dtype)
        return DecodingResult(
            ids=ids,
            lengths=lengths,
            scores=ops.take(loop["score"], chosen, axis=0),
            log_probs=ops.take(loop["cum"], chosen, axis=0),
            extras=extras,
            beam_history=self._beam_history(loop, batch),
        )

    def _beam_history(self, loop, batch):
        """The `BeamHistory` of `loop`, or None when not asked for."""
        if "beam_words" not in loop:
            return None
        ran = (ops.arange(self.max_length) < loop["t"])[:, None]
        scores = ops.where(ran, loop["beam_scores"], loop["score"][None])

        def per_example(x):  # (max_length, B * k) to (B, max_length, k)
            x = ops.reshape(x, (self.max_length, batch, self.beam_size))
            return ops.transpose(x, (1, 0, 2))

        return BeamHistory(
            predicted_ids=per_example(loop["beam_words"]),
            parent_ids=per_example(loop["beam_parents"]),
            scores=per_example(scores),
        )

    def _chosen_extras(self, loop, chosen):
        """The extras of the chosen rows, `(B, max_length, ...)`."""
        buffer = loop["extras"]  # (max_length, N, ...)
        if self.beam_size > 1:
            # Back through the parents: at step s the chosen hypothesis was
            # row `parents[s][row after s]`, where step s's extras are.
            length = self.max_length

            def back(i, rows_and_at):
                row, at = rows_and_at
                s = length - 1 - i
                row = ops.take(ops.take(loop["parents"], s, axis=0), row, axis=0)
                return row, write(at, s, row)

            at = ops.zeros((length, ops.shape(chosen)[0]), "int32")
            _, at = ops.fori_loop(0, length, back, (chosen, at))
            index = ops.reshape(at, ops.shape(at) + (1,) * (len(buffer.shape) - 2))
            buffer = ops.take_along_axis(buffer, index, axis=1)
        return _swap_first_axes(buffer)


# What the dropping searches move from an ended row to the batch's buffers.
_MOVED = ("cum", "score", "lengths", "history")


def _take_rows(loop, index):
    """The rows `index` of a dropping search's `loop` (extras: axis 1)."""
    taken = keras.tree.map_structure(
        lambda x: ops.take(x, index, axis=0),
        {k: v for k, v in loop.items() if k not in ("t", "extras")},
    )
    taken["t"] = loop["t"]
    if "extras" in loop:
        taken["extras"] = ops.take(loop["extras"], index, axis=1)
    return taken


def _scatter_rows(out, loop, index):
    """`out` with the rows `index` of `loop` written at their batch rows."""
    at = ops.expand_dims(ops.take(loop["rows"], index, axis=0), -1)
    out = dict(out)
    for key in _MOVED:
        out[key] = ops.scatter_update(out[key], at, ops.take(loop[key], index, axis=0))
    if "extras" in out:
        rows = _swap_first_axes(ops.take(loop["extras"], index, axis=1))
        out["extras"] = ops.scatter_update(out["extras"], at, rows)
    return out


def _swap_first_axes(x):
    return ops.transpose(x, (1, 0) + tuple(range(2, len(x.shape))))
