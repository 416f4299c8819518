"""Minimum risk training: the expected cost over a few candidate sequences.

Shen et al. 2016 ("Minimum Risk Training for Neural Machine Translation"),
Ayana et al. 2016 (for headlines), Edunov et al. 2018 ("Classical Structured
Prediction Losses for Sequence to Sequence Learning", the risk of its
section 2.3 and the weighted mix with the token-level NLL of 2.4). For each
source, K candidate sequences `y_1 .. y_K` (drawn with
`keras_attn.draw_candidates`, say) are scored by the model, teacher-forced:

    log p(y_k) = sum_t mask_kt log p(y_kt | y_k<t, x)
    s(y_k)     = log p(y_k), or log p(y_k) / n_k with `length_normalize`
                 (n_k the candidate's scored tokens)
    Q(y_k)     = softmax_k(alpha * s(y_k))          over the present candidates
    risk       = sum_k Q(y_k) cost_scale * cost(y_k, y)

so the gradient moves probability towards the candidates that cost less
than the expected cost, `d risk / d s(y_k) = alpha Q(y_k) (cost_k - risk)`.
The cost is not differentiated (ROUGE on token ids by default,
`keras_attn.rouge_cost`).

Edunov et al.'s recipe (fairseq's `sequence_risk` criterion, combined with
the token-level loss by `combined_sequence_criterion`): the beam's n best as
the candidates, the length-normalized score (`length_normalize=True`), the
cost on the metric's 0-100 scale (`100 - BLEU` there; `cost_scale=100` with
`rouge_cost` here), and the loss `(1 - a) * risk + a * token NLL`
(`nll_weight=a`), a = 0.5 in fairseq's examples.
"""

from keras import ops

from keras_attn.layers.masking import masked_softmax, softmax_dtype
from keras_attn.training.loss_reduction import check_reduction, reduce_masked
from keras_attn.training.rouge import rouge_cost, scored_tokens


def minimum_risk_loss(
    log_probs,
    candidate_ids,
    reference_ids,
    *,
    token_mask=None,
    candidate_mask=None,
    cost=None,
    end_id=None,
    pad_id=0,
    alpha=1.0,
    length_normalize=False,
    cost_scale=1.0,
    nll_weight=0.0,
    reference_log_probs=None,
    reference_mask=None,
    reduction="mean",
):
    """The expected cost of K candidates per source under the model.

    Each candidate's score is the masked sum of its token log-probabilities
    (divided by its scored tokens with `length_normalize`); sharpened by
    `alpha` and renormalised over the present candidates, it weights each
    candidate's cost times `cost_scale` (see the module docstring). With
    `nll_weight = w`, the loss of a source is `(1 - w) * risk + w * nll`,
    `nll` the mean negative log-probability of its reference's tokens
    (Edunov et al.'s weighted objective). The mix weighs a risk on the
    cost's scale against an NLL in nats: fairseq's weights assume costs on
    0-100 (`cost_scale=100` with a cost in `[0, 1]`); on 0-1 the NLL
    dominates any `w` but the smallest.

    Args:
        log_probs: float `(batch, K, T)`, each candidate token's
            log-probability under the teacher-forced model; or the model's
            whole distributions `(batch, K, T, V)`, from which the
            candidates' tokens are taken.
        candidate_ids: int `(batch, K, T)`, the candidates (what the cost
            compares, and the tokens taken from `(batch, K, T, V)`
            log-probabilities).
        reference_ids: int `(batch, T_ref)`, the references.
        token_mask: bool or 0/1 `(batch, K, T)`, the tokens that count
            (`draw_candidates(...).token_mask`). None: those before each
            candidate's first `end_id` or `pad_id`, and the end token itself.
        candidate_mask: bool `(batch, K)`, False for a missing candidate
            (`draw_candidates(...).candidate_mask`), which gets no weight.
            A candidate whose log-probability is `-inf` gets none either.
            None: every candidate is present.
        cost: `cost(candidate_ids, reference_ids) -> (batch, K)` float, lower
            is better. None: `rouge_cost` with `end_id` and `pad_id`
            (`1 -` the mean of ROUGE-1, ROUGE-2 and ROUGE-L F1). Its value is
            not differentiated.
        end_id: The end token's id, for the default `token_mask`, cost and
            `reference_mask`.
        pad_id: The padding id, likewise (None: no padding id).
        alpha: Positive float or scalar tensor, Shen et al.'s sharpness:
            `Q(y) ~ p(y) ** alpha`. 1 (Edunov et al.) renormalises the
            model's own probabilities; Shen et al. used 0.005 with 100
            sampled candidates.
        length_normalize: Python bool. True: a candidate's score is its
            log-probability over its scored tokens (`token_mask`'s count,
            the end token included), as in fairseq's `sequence_risk`
            criterion (Edunov et al. 2018), so that `Q` does not favour
            short candidates. (That criterion then takes the softmax of
            `exp` of this mean, which flattens `Q` further; a smaller
            `alpha` flattens it here.) False: the summed log-probability.
        cost_scale: Positive Python float, the factor on every cost: 100
            puts `rouge_cost` (`1 - ROUGE` in `[0, 1]`) on the 0-100 scale
            of fairseq's `100 - BLEU`, which its NLL weights assume. Only
            the risk's scale changes: `Q` does not depend on it.
        nll_weight: Float in `[0, 1]`, the weight of the reference's NLL.
            Above 0, `reference_log_probs` is needed.
        reference_log_probs: float `(batch, T_ref)` (or `(batch, T_ref, V)`)
            log-probabilities of the reference tokens under the
            teacher-forced model.
        reference_mask: `(batch, T_ref)`, the reference tokens that count.
            None: as `token_mask`'s default, from `reference_ids`.
        reduction: `"mean"` over the sources (the default), `"sum"`, or
            `"none"`: one loss per source, `(batch,)`.

    Returns:
        float32 (float64 for float64 log-probabilities) scalar, or `(batch,)`
        for `"none"`. A source without a present candidate has risk 0.

    Examples:
        >>> import numpy as np
        >>> import keras_attn as ka
        >>> END = 2
        >>> # One source, three candidates of up to 4 tokens (END padded).
        >>> candidates = np.array(
        ...     [[[5, 7, 8, END], [5, 6, END, END], [9, END, END, END]]])
        >>> reference = np.array([[5, 7, 8, END]])
        >>> log_probs = np.log(np.full((1, 3, 4), 0.5, "float32"))  # the model's
        >>> loss = ka.minimum_risk_loss(log_probs, candidates, reference, end_id=END)
        >>> round(float(loss), 3)
        0.781
        >>> # Edunov et al.'s score: each candidate's mean token log-probability,
        >>> # log 1/2 for all three, so Q = 1/3 each; costs (0, 11/15, 1) x 100.
        >>> loss = ka.minimum_risk_loss(log_probs, candidates, reference, end_id=END,
        ...     length_normalize=True, cost_scale=100.0)
        >>> round(float(loss), 2)
        57.78
    """
    check_reduction(reduction)
    _check_weights(alpha, nll_weight, reference_log_probs)
    _check_scoring(length_normalize, cost_scale)
    candidate_ids = ops.convert_to_tensor(candidate_ids, "int32")
    if token_mask is None:
        token_mask = scored_tokens(candidate_ids, end_id, pad_id)
    sequence = _sequence_log_probs(log_probs, candidate_ids, token_mask, "log_probs")
    if length_normalize:
        sequence = sequence / _token_counts(token_mask, sequence.dtype)
    present = sequence != float("-inf")
    if candidate_mask is not None:
        present = ops.logical_and(present, ops.cast(candidate_mask, "bool"))
    weights = masked_softmax(ops.cast(alpha, sequence.dtype) * sequence, present)
    if cost is None:
        costs = rouge_cost(candidate_ids, reference_ids, end_id=end_id, pad_id=pad_id)
    else:
        costs = cost(candidate_ids, reference_ids)
    costs = ops.stop_gradient(ops.cast(costs, sequence.dtype))
    if cost_scale != 1:
        costs = costs * cost_scale
    if tuple(costs.shape) != tuple(sequence.shape):
        raise ValueError(
            "`cost` must return one cost per candidate, shape "
            f"{tuple(sequence.shape)}. Received: shape {tuple(costs.shape)}"
        )
    # A select: a missing candidate's cost may be anything, NaN included.
    risk = ops.sum(weights * ops.where(present, costs, 0.0), axis=-1)
    loss = risk
    if not (isinstance(nll_weight, (int, float)) and nll_weight == 0):
        if reference_mask is None:
            reference_mask = scored_tokens(reference_ids, end_id, pad_id)
        reference = _sequence_log_probs(
            reference_log_probs, reference_ids, reference_mask, "reference_log_probs"
        )
        nll = -ops.cast(reference, risk.dtype) / _token_counts(
            reference_mask, risk.dtype
        )
        loss = (1.0 - nll_weight) * risk + nll_weight * nll
    return reduce_masked(loss, None, reduction)


def _sequence_log_probs(log_probs, ids, mask, name):
    """The masked sum over the last token axis; `log_probs` with one more
    axis than `ids` (whole distributions) is first taken at `ids`."""
    log_probs = ops.convert_to_tensor(log_probs)
    log_probs = ops.cast(log_probs, softmax_dtype(log_probs.dtype))
    ids = ops.convert_to_tensor(ids, "int32")
    if len(log_probs.shape) == len(ids.shape) + 1:
        log_probs = ops.take_along_axis(log_probs, ops.expand_dims(ids, -1), -1)
        log_probs = ops.squeeze(log_probs, -1)
    if len(log_probs.shape) != len(ids.shape):
        raise ValueError(
            f"`{name}` must have the shape of its ids {tuple(ids.shape)}, or "
            "that and a vocabulary axis. Received: "
            f"{name}.shape={tuple(log_probs.shape)}"
        )
    # A select, not a product: a masked token's log-probability may be -inf.
    mask = ops.cast(mask, "bool")
    return ops.sum(ops.where(mask, log_probs, 0.0), axis=-1)


def _token_counts(mask, dtype):
    """The tokens `mask` holds on its last axis, at least 1, as `dtype`."""
    counts = ops.sum(ops.cast(ops.cast(mask, "bool"), dtype), axis=-1)
    return ops.maximum(counts, 1.0)


def _check_scoring(length_normalize, cost_scale):
    if not isinstance(length_normalize, bool):
        raise ValueError(
            "`length_normalize` must be a Python bool. Received: "
            f"length_normalize={length_normalize!r}"
        )
    if (
        isinstance(cost_scale, bool)
        or not isinstance(cost_scale, (int, float))
        or not 0 < cost_scale < float("inf")
    ):
        raise ValueError(
            "`cost_scale` must be a positive Python number. Received: "
            f"cost_scale={cost_scale!r}"
        )


def _check_weights(alpha, nll_weight, reference_log_probs):
    if isinstance(alpha, (int, float)) and not alpha > 0:
        raise ValueError(f"`alpha` must be positive. Received: alpha={alpha!r}")
    if isinstance(nll_weight, (int, float)):
        if not 0 <= nll_weight <= 1:
            raise ValueError(
                f"`nll_weight` must be in [0, 1]. Received: nll_weight={nll_weight!r}"
            )
        if nll_weight > 0 and reference_log_probs is None:
            raise ValueError(
                "`nll_weight` > 0 mixes in the reference's NLL, which needs "
                "`reference_log_probs`. Received: reference_log_probs=None"
            )
    elif reference_log_probs is None:
        raise ValueError(
            "A tensor `nll_weight` needs `reference_log_probs`. Received: "
            "reference_log_probs=None"
        )


__all__ = ["minimum_risk_loss"]
