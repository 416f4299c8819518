"""Candidate sequences for sequence-level training, drawn with the searches.

`draw_candidates` runs `keras_attn.sampling_search` (Shen et al.'s sampled
candidates) or `keras_attn.beam_search` (its n best, as Edunov et al.) over
a one-token step, and may put the reference among the candidates. The model
then scores every candidate teacher-forced, and
`keras_attn.minimum_risk_loss` turns those scores into the expected cost.
"""

from typing import Any, NamedTuple

from keras import ops

from keras_attn.search.loop import tile_batch
from keras_attn.search.strategies import beam_search, sampling_search
from keras_attn.training.rouge import sequence_lengths

METHODS = ("sample", "beam")


class Candidates(NamedTuple):
    """K candidate sequences of each example (`draw_candidates`).

    Attributes:
        ids: int32 `(batch, K, max_length)`, padded with `end_id` from
            `lengths` on (the end token itself, then padding).
        lengths: int32 `(batch, K)`, tokens before the end token;
            `max_length` for one cut off without it.
        token_mask: bool `(batch, K, max_length)`, the tokens the model
            scores: the candidate's and its end token (the first
            `min(lengths + 1, max_length)`).
        candidate_mask: bool `(batch, K)`, False for a missing candidate: a
            beam's filler (a beam with fewer live hypotheses than asked) or,
            with `drop_duplicates`, a repeat of an earlier candidate.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> END = 2
        >>> log_probs = ops.log(ops.convert_to_tensor([[0.1, 0.1, 0.5, 0.3]]))
        >>> def step(ids, state):  # the same distribution at every step
        ...     return ops.tile(log_probs, (ops.shape(ids)[0], 1)), state
        >>> candidates = ka.draw_candidates(step, None, np.array([1], "int32"), END,
        ...     max_length=3, num_candidates=2, method="beam")
        >>> tuple(candidates.ids.shape)
        (1, 2, 3)
        >>> ops.convert_to_numpy(candidates.ids).tolist()
        [[[2, 2, 2], [3, 2, 2]]]
        >>> ops.convert_to_numpy(candidates.token_mask).astype(int).tolist()
        [[[1, 0, 0], [1, 1, 0]]]
    """

    ids: Any
    lengths: Any
    token_mask: Any
    candidate_mask: Any


def draw_candidates(
    step,
    initial_state,
    start_ids,
    end_id,
    max_length,
    num_candidates,
    *,
    method="sample",
    beam_size=None,
    reference_ids=None,
    pad_id=0,
    drop_duplicates=True,
    **search_kwargs,
):
    """Draws K candidate sequences per example with the library's searches.

    `"sample"` draws each candidate with `sampling_search` from the step's
    distribution (`temperature`, `top_k`, `top_p`, `seed` in
    `search_kwargs`); the step sees `batch * R` rows, batch-major, with `R`
    the candidates drawn (`num_candidates`, one less with a reference). `"beam"`
    takes the `R` best hypotheses of `beam_search` (`num_hypotheses`), whose
    step sees `batch * beam_size` rows. `initial_state` is tiled here, given
    `(batch, ...)`; a tensor the step captures (the encoder memory) must be
    tiled by the caller, `tile_batch(memory, rows)` with those `rows` per
    example, or be part of the state.

    Then score the candidates with the teacher-forced model: tile the source
    K times (`tile_batch(source, K)`, rows `b * K + k`), feed each candidate
    shifted right behind the start token as the decoder's input, and take
    the log-probabilities of `ids` (reshaped to `(batch * K, max_length)`)
    as targets; `keras_attn.minimum_risk_loss` takes them back as
    `(batch, K, max_length)`, with `token_mask` and `candidate_mask`.

    Draw outside a gradient tape: the search is not differentiated.

    Args:
        step: `step(ids, state) -> (log_probs, state[, extras])`, as in
            `keras_attn.greedy_search`.
        initial_state: Nested tensors with the batch first `(batch, ...)`, or
            None.
        start_ids: int32 `(batch,)`, the first input token of each example.
        end_id: int, the end token.
        max_length: Python int >= 1, the most tokens of a candidate (end
            included).
        num_candidates: Python int >= 1, K, the candidates per example (the
            reference included).
        method: `"sample"` or `"beam"`.
        beam_size: Python int >= the candidates searched, for `"beam"`;
            None: exactly that many.
        reference_ids: Optional int `(batch, T_ref)`: the references, made
            candidate 0 of each example (cut to `max_length`; their tokens
            before the first `end_id` or `pad_id`).
        pad_id: The references' padding id (None: none).
        drop_duplicates: Whether a candidate equal to an earlier one of its
            example (the reference included) is marked missing in
            `candidate_mask`, so that it is not counted twice; a beam's
            hypotheses differ anyway, sampling's may not.
        **search_kwargs: More arguments of the search: `temperature`,
            `top_k`, `top_p`, `seed` of `sampling_search`; `length_penalty`
            of `beam_search`; `min_length`, `banned_ids`,
            `no_repeat_ngram_size`, `processors` of both. Ban `pad_id`
            (`banned_ids`) if the step may choose it: the cost and the
            loss's default masks end a sequence there.

    Returns:
        `Candidates` (ids, lengths, token_mask, candidate_mask), `K =
        num_candidates` per example, the reference first when given.

    Examples:
        >>> import numpy as np
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> V, END = 6, 2
        >>> table = ops.convert_to_tensor(np.random.default_rng(0).normal(size=(V, V)))
        >>> def step(ids, state):  # a bigram model
        ...     return ops.log_softmax(ops.take(table, ids, axis=0)), state
        >>> start_ids = np.array([1, 1], "int32")
        >>> references = np.array([[3, 4, 5, END], [4, 4, END, 0]])
        >>> candidates = ka.draw_candidates(
        ...     step, None, start_ids, END, max_length=5, num_candidates=4,
        ...     reference_ids=references, temperature=1.2, seed=0,
        ...     banned_ids=[0, 1],  # never padding or the start token
        ... )
        >>> tuple(candidates.ids.shape)
        (2, 4, 5)
    """
    if method not in METHODS:
        raise ValueError(
            f"`method` must be one of {METHODS}. Received: method={method!r}"
        )
    least = 1 if reference_ids is None else 2
    if (
        isinstance(num_candidates, bool)
        or not isinstance(num_candidates, int)
        or num_candidates < least
    ):
        raise ValueError(
            "`num_candidates` must be a Python int >= 1, >= 2 with "
            "`reference_ids` (which take one place). Received: "
            f"num_candidates={num_candidates!r}"
        )
    searched = num_candidates - (least - 1)
    start_ids = ops.convert_to_tensor(start_ids, "int32")
    batch = ops.shape(start_ids)[0]
    if method == "sample":
        if beam_size is not None:
            raise ValueError(
                "`beam_size` is for method='beam'. Received: "
                f"beam_size={beam_size!r} with method='sample'"
            )
        if initial_state is not None:
            initial_state = tile_batch(initial_state, searched)
        found = sampling_search(
            step,
            initial_state,
            ops.repeat(start_ids, searched, axis=0),
            end_id,
            max_length,
            **search_kwargs,
        )
        present = ops.ones((batch, searched), "bool")
    else:
        found = beam_search(
            step,
            initial_state,
            start_ids,
            end_id,
            max_length,
            searched if beam_size is None else beam_size,
            num_hypotheses=searched,
            **search_kwargs,
        )
        present = ops.reshape(found.log_probs != float("-inf"), (batch, searched))
    ids = ops.reshape(found.ids, (batch, searched, max_length))
    lengths = ops.reshape(found.lengths, (batch, searched))
    if reference_ids is not None:
        reference, reference_length = _as_candidate(
            reference_ids, end_id, pad_id, max_length
        )
        ids = ops.concatenate([reference[:, None], ids], axis=1)
        lengths = ops.concatenate([reference_length[:, None], lengths], axis=1)
        present = ops.concatenate([ops.ones((batch, 1), "bool"), present], axis=1)
    if drop_duplicates:
        present = ops.logical_and(present, ops.logical_not(_repeats(ids, present)))
    token_mask = (
        ops.arange(max_length) < ops.minimum(lengths + 1, max_length)[..., None]
    )
    return Candidates(ids, lengths, token_mask, present)


def _as_candidate(reference_ids, end_id, pad_id, max_length):
    """The references as the search writes its hypotheses: `(batch,
    max_length)` ids padded with `end_id` from their lengths on, and the
    lengths `(batch,)`."""
    reference = ops.convert_to_tensor(reference_ids, "int32")
    # Padded by `max_length` then cut: the width may be unknown when traced
    # (a length-bucketed batch).
    padding = ops.full((ops.shape(reference)[0], max_length), end_id, "int32")
    reference = ops.concatenate([reference, padding], axis=1)[:, :max_length]
    reference = ops.reshape(reference, (-1, max_length))  # a static width
    lengths = sequence_lengths(reference, end_id, pad_id)
    inside = ops.arange(max_length) < lengths[:, None]
    return ops.where(inside, reference, ops.cast(end_id, "int32")), lengths


def _repeats(ids, present):
    """bool `(batch, K)`: candidate `k` equals a present candidate `j < k`."""
    same = ops.all(ids[:, :, None, :] == ids[:, None, :, :], axis=-1)
    count = ops.shape(ids)[1]
    earlier = ops.arange(count)[None, :] < ops.arange(count)[:, None]
    same = ops.logical_and(same, ops.logical_and(earlier, present[:, None, :]))
    return ops.any(same, axis=-1)


__all__ = ["Candidates", "draw_candidates"]
