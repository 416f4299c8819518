"""Greedy, beam and sampling search over any one-token step, on every backend.

The search knows nothing of the model (the design of OpenNMT-tf's
`opennmt/utils/decoding.py`). A model exposes a step function

    step(ids, state) -> (log_probs, state)            or
    step(ids, state) -> (log_probs, state, extras)

* `ids`: int32 `(N,)`, the previous token of each row (the start ids first).
* `state`: a nested structure of tensors, each with the rows first `(N, ...)`
  (`None` if the search was given none).
* `log_probs`: float `(N, V)`; `V` may depend on the batch (a copy
  mechanism's extended vocabulary) but is the same at every step. The search
  applies the processors to them and chooses; the step knows nothing of the
  constraints.
* the new `state`: the same structure, dtypes and shapes.
* `extras`: optional tensor `(N, ...)`, recorded at every step for the chosen
  hypothesis (the step's attention, for heatmaps).

Constraints are processors (`keras_attn.search.processors`), composed in a list;
sampling's temperature, top-k and top-p are processors too, warpers
(`keras_attn.search.warpers`).

The loops are `keras.ops.while_loop`s over buffers of `max_length` steps, so
the same call runs eagerly, under `jax.jit`, inside a `tf.function` with a
dynamic batch, in a SavedModel, and on torch; the loop stops once every row
has ended. The first step runs before the loop, where the shape of `extras`
is learnt.

Outputs (every strategy returns a `DecodingResult`):

* `ids` int32 `(B, max_length)`: the generated tokens, the start token
  excluded. Positions `>= lengths[b]` hold `end_id`: the end token itself
  when the hypothesis ended, then padding.
* `lengths` int32 `(B,)`: tokens before the end token (not counted);
  `max_length` for a hypothesis cut off without one.
* `log_probs` float32 `(B,)`: the sum of the (constrained) log-probabilities
  of the generated tokens, the end token included.
* `scores` float32 `(B,)`: what ranks hypotheses. Greedy and sampling:
  `log_probs`. Beam: `log_probs / lp(n)` with GNMT's length penalty
  `lp(n) = ((5 + n) / 6) ** length_penalty`, `n` the scored tokens
  (`lengths + 1` when the hypothesis ended, else `max_length`).
* `extras` `(B, max_length, ...)` (None without): the step's extras of the
  chosen hypothesis; zero from `lengths[b]` on (the end step included).
* `beam_history` (None unless `beam_search(..., return_beam_history=True)`):
  a `BeamHistory` of every beam's token, parent and score at every step.

A step returns log-probabilities (`keras.ops.log_softmax(logits)`): the
first step's are checked, eagerly (`check_log_probs`). A step that returns
logits, as keras-hub's and Hugging Face's models do, is searched with
`from_logits=True`: the search takes their `log_softmax` in float32.

`end_id` ends a row; so does any of `stop_ids`. Both are checked against the
step's vocabulary at the first step (where it is static): an end id outside
it would never end a row.

On torch a search records no gradients (it runs under `torch.no_grad()`):
its results carry none, and autograd keeps no graph of the loop. A
gradient through a decoded hypothesis comes from scoring its ids again,
as minimum-risk training does (`keras_attn.training.minimum_risk`).

An ended hypothesis only continues with `end_id` at zero cost. If a row has
every token banned, the search still picks one (at `-inf`): keep constraints
satisfiable.
"""

import functools

import keras
from keras import ops

from keras_attn.arguments import refuses_tfa_names
from keras_attn.search.checks import (
    check_beam_sizes,
    check_start_ids,
    check_stop_ids,
)
from keras_attn.search.choosers import sampler, top_k_chooser
from keras_attn.search.loop import BeamHistory, DecodingResult, SearchLoop, tile_batch
from keras_attn.search.processors import MinLength, constraints
from keras_attn.search.warpers import sampling_warpers, split_warpers

__all__ = [
    "BeamHistory",
    "DecodingResult",
    "beam_search",
    "greedy_search",
    "sampling_search",
    "tile_batch",
]


def _without_gradients(search):
    """Runs `search` under `torch.no_grad()` on torch, as it is elsewhere.

    Choosing ids has no gradient; recording the loop's graph would only cost
    time and memory. torch is imported on the torch backend only.
    """

    @functools.wraps(search)
    def run(*args, **kwargs):
        if keras.config.backend() != "torch":
            return search(*args, **kwargs)
        import torch

        with torch.no_grad():
            return search(*args, **kwargs)

    return run


@refuses_tfa_names("search")
@_without_gradients
def greedy_search(
    step,
    initial_state,
    start_ids,
    end_id,
    max_length,
    *,
    min_length=0,
    banned_ids=(),
    no_repeat_ngram_size=0,
    processors=(),
    drop_finished=False,
    check_log_probs=True,
    from_logits=False,
    stop_ids=(),
):
    """Decodes the most probable token at each step.

    Args:
        step: `step(ids, state) -> (log_probs, state[, extras])`, as the
            `keras_attn.search.strategies` module docstring states it.
        initial_state: Nested tensors with the batch first `(B, ...)`, or None.
        start_ids: int32 `(B,)`, the first input token of each example.
        end_id: int scalar, the end token.
        max_length: Python int >= 1, the most tokens generated (end included).
        min_length: int scalar; `end_id` is banned for the first `min_length`
            steps, so `lengths >= min_length` (`processors.MinLength`).
        banned_ids: Ids never generated (`processors.BannedIds`).
        no_repeat_ngram_size: Python int; if > 0, no n-gram of this size
            appears twice in a hypothesis (`processors.NoRepeatNgram`).
        processors: More processors, applied after those above; no warpers
            (`keras_attn.search.warpers`), which only shape sampling.
        drop_finished: take ended rows out of the batch, so that later
            steps compute fewer rows: the same results, faster when the
            lengths vary. `True`: every step computes only the open rows;
            the loop's shapes change, which TensorFlow and torch allow and
            JAX and XLA do not. `"halves"`: the batch is halved each time
            half its rows have ended, in loops of fixed shapes (JAX, XLA),
            so a step of a batch of up to 128 rows computes at most twice
            the open rows. `step` then sees fewer rows than `start_ids` has,
            so any per-row tensor it uses (the encoder memory) must be in
            `initial_state`, to be dropped with its row. Both give the same
            results as `False` unless a constraint bans every token of a
            row (its score is `-inf`; the plain loop stops there, these
            decode to the end).
        check_log_probs: Check that the first step's `log_probs` are
            log-probabilities (each row's logsumexp 0, within 1e-3; 0.1 for
            16-bit ones) and raise a ValueError if not (logits, say). The
            check reads values, so it runs eagerly only: inside `jax.jit`,
            a `tf.function` or `torch.compile` it is skipped. False for
            scores that are not log-probabilities by design.
        from_logits: Whether `step` returns logits rather than
            log-probabilities: then the search takes their `log_softmax`, in
            float32, and checks nothing (as Keras' losses'
            `from_logits=True`).
        stop_ids: An int or a list of ints: tokens that end a row as
            `end_id` does (a sentence's full stop, a second end token). The
            row keeps the stop token at `lengths[b]` (not counted) and is
            padded with `end_id` after it; `min_length` bans them too.
            `end_id` and the stop ids must be in the step's vocabulary
            `[0, V)`; the first step checks them where `V` is static.

    Returns:
        A `DecodingResult`; `scores == log_probs`.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> START, END = 1, 2
        >>> # A bigram model over 5 ids: row i holds P(next token | i).
        >>> table = ops.log(ops.convert_to_tensor([
        ...     [0.2, 0.2, 0.2, 0.2, 0.2],
        ...     [0.05, 0.05, 0.1, 0.5, 0.3],  # after START: 3, or 4
        ...     [0.2, 0.2, 0.2, 0.2, 0.2],
        ...     [0.05, 0.05, 0.3, 0.1, 0.5],  # after 3: 4, or END
        ...     [0.05, 0.05, 0.7, 0.1, 0.1],  # after 4: END
        ... ]))
        >>> def step(ids, state):  # log-probabilities (N, V), as the search needs
        ...     return ops.take(table, ids, axis=0), state
        >>> result = ka.greedy_search(step, None, np.array([START], "int32"), END, 5)
        >>> ops.convert_to_numpy(result.ids).tolist()
        [[3, 4, 2, 2, 2]]
        >>> ops.convert_to_numpy(result.lengths).tolist()  # tokens before END
        [2]
        >>> round(float(result.scores[0]), 4)  # log(0.5 * 0.5 * 0.7)
        -1.743
    """
    step, check_log_probs = _scored_step(step, from_logits, check_log_probs)
    stop_ids = check_stop_ids(stop_ids)
    processors = _constraints_only(
        "greedy_search",
        _stop_bans(end_id, min_length, stop_ids)
        + constraints(end_id, min_length, banned_ids, no_repeat_ngram_size, processors),
    )
    if isinstance(drop_finished, str) and drop_finished != "halves":
        raise ValueError(
            "`drop_finished` must be True, False or 'halves'. Received: "
            f"drop_finished={drop_finished!r}"
        )
    search = SearchLoop(
        step,
        end_id,
        max_length,
        processors,
        check_log_probs=check_log_probs,
        stop_ids=stop_ids,
    )
    if drop_finished == "halves":
        return search.run_halving(initial_state, start_ids)
    if drop_finished:
        return search.run_dropping_finished(initial_state, start_ids)
    return search.run(initial_state, start_ids)


@refuses_tfa_names("search")
@_without_gradients
def beam_search(
    step,
    initial_state,
    start_ids,
    end_id,
    max_length,
    beam_size,
    *,
    length_penalty=0.0,
    min_length=0,
    banned_ids=(),
    no_repeat_ngram_size=0,
    processors=(),
    num_hypotheses=1,
    check_log_probs=True,
    return_beam_history=False,
    from_logits=False,
    stop_ids=(),
):
    """Beam search, batched; returns the best hypothesis of each example.

    The step function sees `N = B * beam_size` rows, batch-major (row
    `b * beam_size + k` is beam `k` of example `b`). `initial_state` is given
    untiled, `(B, ...)`, and tiled here; after each step the state is
    reordered with the surviving beams. Tensors the step function captures
    (the encoder memory) must be tiled by the caller with `tile_batch`.

    Ended hypotheses stay in the beam, frozen (they extend only with `end_id`
    at zero cost), and compete with the open ones on their normalised score:
    the pool of finished hypotheses is the beam itself. The loop stops when
    every beam has ended (or is at `-inf`) or after `max_length` steps. With
    `beam_size` at least the number of possible hypotheses it is exhaustive.

    Args:
        step: `step(ids, state) -> (log_probs, state[, extras])`.
        initial_state: Nested tensors with the batch first `(B, ...)`, or None.
        start_ids: int32 `(B,)`, the first input token of each example.
        end_id: int scalar, the end token.
        max_length: Python int >= 1, the most tokens generated (end included).
        beam_size: Python int >= 1.
        length_penalty: GNMT's alpha (float or scalar tensor): hypotheses
            are ranked by `log_probs / ((5 + n) / 6) ** alpha`, `n` the scored
            tokens (end included). 0 ranks by the raw sum; larger favours
            longer ones.
        min_length, banned_ids, no_repeat_ngram_size, processors: As in
            `greedy_search`.
        num_hypotheses: Python int in `[1, beam_size]`: the n best hypotheses
            of each example (an n-best list, as sequence-level distillation's
            interpolation picks from). A beam with fewer live hypotheses
            fills the list with ones at `-inf`.
        check_log_probs, from_logits, stop_ids: As in `greedy_search`.
        return_beam_history: If True, `beam_history` holds every beam at
            every step: a `keras_attn.search.BeamHistory` of
            `predicted_ids`, `parent_ids` and `scores`, each
            `(B, max_length, beam_size)` (TFA's `BeamSearchDecoderOutput`).

    Returns:
        A `DecodingResult` for the best beam of each example; `scores` is the
        normalised score, `log_probs` the raw sum. With `num_hypotheses=n`
        every field but `beam_history` has `B * n` rows, batch-major and
        best first: row `b * n + i` is the `i`-th best hypothesis of
        example `b`. `beam_history` is None unless `return_beam_history`.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> START, END = 1, 2
        >>> # A bigram model over 5 ids: row i holds P(next token | i).
        >>> table = ops.log(ops.convert_to_tensor([
        ...     [0.2, 0.2, 0.2, 0.2, 0.2],
        ...     [0.05, 0.05, 0.1, 0.5, 0.3],  # after START: 3, or 4
        ...     [0.2, 0.2, 0.2, 0.2, 0.2],
        ...     [0.05, 0.05, 0.3, 0.1, 0.5],  # after 3: 4, or END
        ...     [0.05, 0.05, 0.7, 0.1, 0.1],  # after 4: END
        ... ]))
        >>> def step(ids, state):  # log-probabilities (N, V), as the search needs
        ...     return ops.take(table, ids, axis=0), state
        >>> start_ids = np.array([START], "int32")
        >>> result = ka.beam_search(step, None, start_ids, END, 5, beam_size=2)
        >>> ops.convert_to_numpy(result.ids).tolist()  # greedy's 3 4 scores 0.175
        [[4, 2, 2, 2, 2]]
        >>> round(float(result.scores[0]), 4)  # log(0.3 * 0.7)
        -1.5606
        >>> result = ka.beam_search(step, None, start_ids, END, 5, beam_size=2,
        ...     num_hypotheses=2)  # an n-best list, best first
        >>> ops.convert_to_numpy(result.ids).tolist()
        [[4, 2, 2, 2, 2], [3, 4, 2, 2, 2]]
    """
    check_beam_sizes(beam_size, num_hypotheses)
    step, check_log_probs = _scored_step(step, from_logits, check_log_probs)
    stop_ids = check_stop_ids(stop_ids)
    processors = _constraints_only(
        "beam_search",
        _stop_bans(end_id, min_length, stop_ids)
        + constraints(end_id, min_length, banned_ids, no_repeat_ngram_size, processors),
    )
    search = SearchLoop(
        step,
        end_id,
        max_length,
        processors,
        beam_size,
        length_penalty,
        num_hypotheses,
        check_log_probs=check_log_probs,
        beam_history=bool(return_beam_history),
        stop_ids=stop_ids,
    )
    return search.run(initial_state, start_ids, top_k_chooser(beam_size))


@refuses_tfa_names("search")
@_without_gradients
def sampling_search(
    step,
    initial_state,
    start_ids,
    end_id,
    max_length,
    *,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    seed=None,
    min_length=0,
    banned_ids=(),
    no_repeat_ngram_size=0,
    processors=(),
    check_log_probs=True,
    from_logits=False,
    stop_ids=(),
):
    """Draws each token from the (constrained, warped) next-token distribution.

    The constraints (every processor but the warpers) give the scored
    log-probabilities; the warpers then shape what is drawn from: the
    keywords' `Temperature`, `TopK` and `TopP` (`keras_attn.search.warpers`) in that
    order, then the warpers in `processors`, in theirs. The default is
    `softmax(log_probs / temperature)`, cut to the `top_k` most probable
    tokens, then to the smallest set whose probability reaches `top_p`
    (nucleus sampling; the most probable token is always kept, and tokens
    tied with the last one kept stay too). The draws are inverse-CDF lookups
    of `max_length * B` uniforms drawn once before the loop: the same `seed`
    gives the same tokens, under `jit` too, and no random op runs inside the
    loop.

    Args:
        step, initial_state, start_ids, end_id, max_length: As in
            `greedy_search`.
        temperature: Positive float; < 1 sharpens, > 1 flattens
            (`Temperature`).
        top_k: Python int; if > 0, only the `top_k` most probable tokens
            (`TopK`).
        top_p: Float in (0, 1]; 1 keeps every token (`TopP`).
        seed: int, `keras.random.SeedGenerator` or None (Keras' global
            generator). Under `jax.jit`, pass an int.
        min_length, banned_ids, no_repeat_ngram_size: As in `greedy_search`.
        processors: More processors, applied after those above; the warpers
            among them after every other.
        check_log_probs, from_logits, stop_ids: As in `greedy_search`.

    Returns:
        A `DecodingResult`; `scores == log_probs`, the sum of the constrained
        log-probabilities before the warpers.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> START, END = 1, 2
        >>> # A bigram model over 5 ids: row i holds P(next token | i).
        >>> table = ops.log(ops.convert_to_tensor([
        ...     [0.2, 0.2, 0.2, 0.2, 0.2],
        ...     [0.05, 0.05, 0.1, 0.5, 0.3],  # after START: 3, or 4
        ...     [0.2, 0.2, 0.2, 0.2, 0.2],
        ...     [0.05, 0.05, 0.3, 0.1, 0.5],  # after 3: 4, or END
        ...     [0.05, 0.05, 0.7, 0.1, 0.1],  # after 4: END
        ... ]))
        >>> def step(ids, state):  # log-probabilities (N, V), as the search needs
        ...     return ops.take(table, ids, axis=0), state
        >>> start_ids = np.full((4,), START, "int32")  # 4 draws
        >>> result = ka.sampling_search(step, None, start_ids, END, 5, top_k=2, seed=0)
        >>> tuple(result.ids.shape)
        (4, 5)
        >>> set(ops.convert_to_numpy(result.ids)[:, 0].tolist()) <= {3, 4}  # top 2 only
        True
    """
    warpers = sampling_warpers(temperature, top_k, top_p)
    step, check_log_probs = _scored_step(step, from_logits, check_log_probs)
    stop_ids = check_stop_ids(stop_ids)
    processors, more_warpers = split_warpers(
        _stop_bans(end_id, min_length, stop_ids)
        + constraints(end_id, min_length, banned_ids, no_repeat_ngram_size, processors)
    )
    search = SearchLoop(
        step,
        end_id,
        max_length,
        processors,
        check_log_probs=check_log_probs,
        stop_ids=stop_ids,
    )
    start_ids = check_start_ids(start_ids, initial_state)
    batch = ops.shape(start_ids)[0]
    uniforms = keras.random.uniform((max_length, batch), seed=seed)

    choose = sampler(warpers + more_warpers, uniforms)
    return search.run(initial_state, start_ids, choose)


def _scored_step(step, from_logits, check_log_probs):
    """`(step, check_log_probs)`: a step of logits made one of
    log-probabilities (`log_softmax` in float32), which needs no check."""
    if not isinstance(from_logits, bool):
        raise ValueError(
            "`from_logits` must be True (the step returns logits) or False "
            f"(log-probabilities). Received: from_logits={from_logits!r}"
        )
    if not from_logits:
        return step, check_log_probs

    def log_probs_step(ids, state):
        out = step(ids, state)
        log_probs = ops.log_softmax(ops.cast(out[0], "float32"), axis=-1)
        return (log_probs, *out[1:])

    return log_probs_step, False


def _stop_bans(end_id, min_length, stop_ids):
    """`MinLength` for each stop id: `min_length` bans them as `end_id`."""
    if isinstance(min_length, int) and min_length == 0:
        return []
    return [MinLength(min_length, stop_id) for stop_id in stop_ids]


def _constraints_only(strategy, processors):
    """`processors`, or a ValueError if a warper is among them."""
    warpers = split_warpers(processors)[1]
    if warpers:
        names = [type(w).__name__ for w in warpers]
        raise ValueError(
            f"`processors` of `{strategy}` must hold no warpers (temperature, "
            "top-k and top-p shape `sampling_search`'s draws only). Received: "
            f"processors with {names}"
        )
    return processors
