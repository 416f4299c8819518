"""ROUGE-N and ROUGE-L F1 on token ids, in the graph, batched.

The scores of sequence-level training (`keras_attn.minimum_risk_loss`):
`keras.ops` only, so they run under `jax.jit`, in a `tf.function` and on
torch, and take static lengths (the id tensors' last axis). They compare
token ids, not text: no tokenizing, no stemming, so they differ from the
`rouge-score` package on text that ids do not map one to one.

A sequence is its tokens before the first end token (`end_id`) or padding
token (`pad_id`), whichever comes first; what follows does not count.

* ROUGE-N: with `overlap` the clipped count of shared n-grams (an n-gram
  counts as often as it occurs in both, at most),
  `P = overlap / candidate n-grams`, `R = overlap / reference n-grams`.
* ROUGE-L: with `lcs` the length of the longest common subsequence (by
  dynamic programming), `P = lcs / candidate tokens`,
  `R = lcs / reference tokens`.
* F1 `= 2 P R / (P + R) = 2 overlap / (candidate + reference counts)`; 0 when
  either side has no n-gram.
"""

from keras import ops

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")


def sequence_lengths(ids, end_id=None, pad_id=0):
    """int32 `(...)`: the tokens of each row of `ids` `(..., T)` before its
    first `end_id` or `pad_id` (either may be None: no such token)."""
    ids = ops.convert_to_tensor(ids, "int32")
    stops = _stops(ids, end_id, pad_id)
    before = ops.cumsum(ops.cast(stops, "int32"), axis=-1) == 0
    return ops.sum(ops.cast(before, "int32"), axis=-1)


def scored_tokens(ids, end_id=None, pad_id=0):
    """bool `(..., T)`: the tokens a teacher-forced model scores in each row
    of `ids`: those before the first `end_id` or `pad_id`, and that first
    token too when it is `end_id` (the end token is predicted; padding is
    not)."""
    ids = ops.convert_to_tensor(ids, "int32")
    stops = ops.cast(_stops(ids, end_id, pad_id), "int32")
    seen = ops.cumsum(stops, axis=-1)
    first_stop = ops.logical_and(seen == 1, stops == 1)
    is_end = ops.zeros_like(first_stop) if end_id is None else ids == end_id
    return ops.logical_or(seen == 0, ops.logical_and(first_stop, is_end))


def rouge_n(candidate_ids, reference_ids, n=1, *, end_id=None, pad_id=0):
    """ROUGE-N F1 of each candidate against its reference, on token ids.

    N-gram counts are clipped: an n-gram the candidate repeats counts at most
    as often as the reference has it. See the module docstring for what
    counts as a sequence.

    Args:
        candidate_ids: int `(..., T)`, e.g. `(batch, K, T)` for K candidates
            of each example.
        reference_ids: int `(..., T_ref)`: the same leading axes, or one
            fewer (`(batch, T_ref)` against `(batch, K, T)`): each reference
            then scores all the candidates of its example.
        n: Python int >= 1, the n-gram size.
        end_id: The end token's id, or None.
        pad_id: The padding id, or None.

    Returns:
        float32 F1 in `[0, 1]`, the candidates' leading shape (`(batch, K)`).

    Examples:
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> # The sequences are [5, 6, 7] and [5, 7, 8]: P = R = F1 = 2/3.
        >>> f1 = ka.rouge_n([[5, 6, 7, 2, 0]], [[5, 7, 8, 2]], n=1, end_id=2)
        >>> print(ops.convert_to_numpy(f1).round(4))
        [0.6667]
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"`n` must be a Python int >= 1. Received: n={n!r}")
    candidates, references = _align(candidate_ids, reference_ids)
    cand_valid = _valid_ngrams(candidates, n, end_id, pad_id)
    ref_valid = _valid_ngrams(references, n, end_id, pad_id)
    if cand_valid is None or ref_valid is None:  # Shorter than one n-gram.
        return ops.zeros(ops.shape(candidates)[:-1], "float32")
    # The i-th candidate n-gram is its k-th occurrence (k counted from 0 over
    # the candidate's earlier n-grams); it is matched, clipped, iff the
    # reference holds it more than k times.
    earlier = _ngram_equal(candidates, candidates, n)
    before = (
        ops.arange(ops.shape(earlier)[-1])[None, :]
        < ops.arange(ops.shape(earlier)[-1])[:, None]
    )
    earlier = ops.logical_and(earlier, before)
    occurrence = _count_valid(earlier, cand_valid)
    in_reference = _count_valid(_ngram_equal(candidates, references, n), ref_valid)
    matched = ops.logical_and(cand_valid, occurrence < in_reference)
    return _f1(_count(matched), _count(cand_valid), _count(ref_valid))


def rouge_l(candidate_ids, reference_ids, *, end_id=None, pad_id=0):
    """ROUGE-L F1 of each candidate against its reference, on token ids.

    The longest common subsequence by dynamic programming, one candidate
    token at a time over all the rows at once. Arguments and shapes as in
    `rouge_n`.

    Args:
        candidate_ids: As in `rouge_n`.
        reference_ids: As in `rouge_n`.
        end_id: As in `rouge_n`.
        pad_id: As in `rouge_n`.

    Returns:
        float32 F1 in `[0, 1]`, the candidates' leading shape.

    Examples:
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> # The LCS of [5, 6, 7] and [5, 7, 8] is [5, 7]: F1 = 2/3.
        >>> f1 = ka.rouge_l([[5, 6, 7, 2, 0]], [[5, 7, 8, 2]], end_id=2)
        >>> print(ops.convert_to_numpy(f1).round(4))
        [0.6667]
    """
    candidates, references = _align(candidate_ids, reference_ids)
    cand_length = sequence_lengths(candidates, end_id, pad_id)
    ref_length = sequence_lengths(references, end_id, pad_id)
    lcs = _lcs_lengths(candidates, references, cand_length, ref_length)
    return _f1(lcs, cand_length, ref_length)


def rouge_cost(
    candidate_ids, reference_ids, *, end_id=None, pad_id=0, rouge_types=ROUGE_TYPES
):
    """`1 - ROUGE F1`, averaged over `rouge_types`: sequence training's cost.

    The default is the mean of ROUGE-1, ROUGE-2 and ROUGE-L, the three the
    summarizer reports: ROUGE-1 alone ignores word order, ROUGE-2 alone is
    0 for most candidates of a weak model, which gives no signal.

    Args:
        candidate_ids, reference_ids, end_id, pad_id: As in `rouge_n`.
        rouge_types: Names among `"rouge1"`, `"rouge2"`, ... (`"rougeN"` for
            any N) and `"rougeL"`.

    Returns:
        float32 cost in `[0, 1]`, the candidates' leading shape.

    Examples:
        >>> import functools
        >>> from keras import ops
        >>> import keras_attn as ka
        >>> cost = functools.partial(ka.rouge_cost, end_id=2, rouge_types=["rouge1"])
        >>> costs = cost([[[5, 6, 7, 2], [5, 7, 8, 2]]], [[5, 7, 8, 2]])
        >>> print(ops.convert_to_numpy(costs).round(4))
        [[0.3333 0.    ]]
    """
    rouge_types = list(rouge_types)
    if not rouge_types:
        raise ValueError("`rouge_types` must name at least one score. Received: []")
    scores = []
    for name in rouge_types:
        if name == "rougeL":
            scores.append(
                rouge_l(candidate_ids, reference_ids, end_id=end_id, pad_id=pad_id)
            )
        elif name.startswith("rouge") and name[5:].isdigit() and int(name[5:]) >= 1:
            scores.append(
                rouge_n(
                    candidate_ids,
                    reference_ids,
                    int(name[5:]),
                    end_id=end_id,
                    pad_id=pad_id,
                )
            )
        else:
            raise ValueError(
                "`rouge_types` must hold 'rougeN' (N >= 1) or 'rougeL'. "
                f"Received: rouge_types={rouge_types!r}"
            )
    return 1.0 - sum(scores) / len(scores)


def _stops(ids, end_id, pad_id):
    stops = ops.zeros_like(ids, "bool")
    for stop_id in (end_id, pad_id):
        if stop_id is not None:
            stops = ops.logical_or(stops, ids == stop_id)
    return stops


def _align(candidate_ids, reference_ids):
    """Both as int32; the references with the candidates' rank (an axis
    before the last inserted when they have one fewer)."""
    candidates = ops.convert_to_tensor(candidate_ids, "int32")
    references = ops.convert_to_tensor(reference_ids, "int32")
    if len(references.shape) == len(candidates.shape) - 1:
        references = ops.expand_dims(references, -2)
    if len(references.shape) != len(candidates.shape) or len(candidates.shape) < 1:
        raise ValueError(
            "`reference_ids` must have the rank of `candidate_ids` or one less. "
            f"Received: candidate_ids.shape={tuple(candidates.shape)}, "
            f"reference_ids.shape={tuple(references.shape)}"
        )
    return candidates, references


def _valid_ngrams(ids, n, end_id, pad_id):
    """bool `(..., T - n + 1)`: n-gram `i` lies inside the sequence; None
    when `T < n`."""
    positions = ids.shape[-1] - n + 1
    if positions < 1:
        return None
    lengths = sequence_lengths(ids, end_id, pad_id)
    return ops.arange(positions) + n <= lengths[..., None]


def _ngram_equal(a, b, n):
    """bool `(..., Ta - n + 1, Tb - n + 1)`: n-gram `i` of `a` equals n-gram
    `j` of `b` (leading axes broadcast)."""
    equal = ops.expand_dims(a, -1) == ops.expand_dims(b, -2)
    rows, cols = a.shape[-1] - n + 1, b.shape[-1] - n + 1
    match = equal[..., :rows, :cols]
    for k in range(1, n):
        match = ops.logical_and(match, equal[..., k : k + rows, k : k + cols])
    return match


def _count_valid(equal, valid_columns):
    """int32 `(..., rows)`: the columns of `equal` that hold and are valid."""
    both = ops.logical_and(equal, ops.expand_dims(valid_columns, -2))
    return ops.sum(ops.cast(both, "int32"), axis=-1)


def _count(mask):
    return ops.sum(ops.cast(mask, "int32"), axis=-1)


def _f1(overlap, candidate_count, reference_count):
    overlap = ops.cast(overlap, "float32")
    total = ops.cast(candidate_count + reference_count, "float32")
    return 2.0 * overlap / ops.maximum(total, 1.0)


def _lcs_lengths(a, b, a_length, b_length):
    """int32 `(...)`: the longest common subsequence of the valid prefixes.

    Row `i` of the table is `L[i][j] = max(L[i][j-1], c_j)` with
    `c_j = max(L[i-1][j], L[i-1][j-1] + 1 if a_i == b_j)`: a prefix maximum
    of `c`, taken in log2(T_b) shifted maxima, so each row is a few
    vectorised ops. Tokens outside the prefixes never match, so the last
    entry of the last row is the answer.
    """
    valid_a = ops.arange(a.shape[-1]) < a_length[..., None]
    valid_b = ops.arange(b.shape[-1]) < b_length[..., None]
    match = ops.logical_and(
        ops.expand_dims(a, -1) == ops.expand_dims(b, -2),
        ops.logical_and(ops.expand_dims(valid_a, -1), ops.expand_dims(valid_b, -2)),
    )
    match = ops.moveaxis(ops.cast(match, "int32"), -2, 0)  # (Ta, ..., Tb)
    width = b.shape[-1]

    def row(i, previous):
        diagonal = ops.concatenate(
            [ops.zeros_like(previous[..., :1]), previous[..., :-1]], axis=-1
        )
        table = ops.maximum(previous, (diagonal + 1) * ops.take(match, i, axis=0))
        shift = 1
        while shift < width:
            shifted = ops.concatenate(
                [ops.zeros_like(table[..., :shift]), table[..., :-shift]], axis=-1
            )
            table = ops.maximum(table, shifted)
            shift *= 2
        return table

    first = ops.zeros_like(match[0])
    return ops.fori_loop(0, a.shape[-1], row, first)[..., -1]


__all__ = ["rouge_cost", "rouge_l", "rouge_n"]
