"""`keras_attn.minimum_risk_loss` against a float64 numpy reference written
from the formulas (Shen et al. 2016; Edunov et al. 2018): the value, the
masks, the length-normalized scores, the costs' scale, the mix with the
reference's NLL, and its gradient against central finite differences of the
reference."""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka

BACKEND = keras.backend.backend()
END, PAD = 2, 0
B, K, T, TR, V = 3, 4, 5, 6, 7


def np_(x):
    return np.asarray(ops.convert_to_numpy(x), np.float64)


def reference_loss(
    log_probs,
    token_mask,
    candidate_mask,
    costs,
    alpha=1.0,
    nll_weight=0.0,
    reference_log_probs=None,
    reference_mask=None,
    reduction="mean",
    length_normalize=False,
    cost_scale=1.0,
):
    """The loss in float64: per source, `sum_k Q_k cost_scale cost_k` with
    `Q = softmax(alpha * s_k)` over the present candidates, `s_k` the
    candidate's summed log-probability (over its token count with
    `length_normalize`), mixed with the reference's mean token NLL."""
    losses = []
    for b in range(log_probs.shape[0]):
        present = [k for k in range(log_probs.shape[1]) if candidate_mask[b, k]]
        risk = 0.0
        if present:
            tokens = [log_probs[b, k][token_mask[b, k]] for k in present]
            if length_normalize:
                sequence = np.array([np.mean(t) for t in tokens])
            else:
                sequence = np.array([np.sum(t) for t in tokens])
            q = np.exp(alpha * sequence - np.max(alpha * sequence))
            q /= q.sum()
            risk = float(np.sum(q * cost_scale * costs[b, present]))
        nll = 0.0
        if nll_weight:
            tokens = reference_log_probs[b][reference_mask[b]]
            nll = -np.sum(tokens) / max(len(tokens), 1)
        losses.append((1 - nll_weight) * risk + nll_weight * nll)
    losses = np.array(losses)
    return {"mean": losses.mean(), "sum": losses.sum(), "none": losses}[reduction]


def random_case(seed=0):
    rng = np.random.default_rng(seed)
    log_probs = np.log(rng.uniform(0.05, 1.0, (B, K, T)))
    token_mask = np.arange(T) < rng.integers(1, T + 1, (B, K))[..., None]
    candidate_mask = rng.random((B, K)) < 0.7
    candidate_mask[:, 0] = True
    costs = rng.uniform(0.0, 1.0, (B, K))
    reference_log_probs = np.log(rng.uniform(0.05, 1.0, (B, TR)))
    reference_mask = np.arange(TR) < rng.integers(1, TR + 1, B)[:, None]
    ids = rng.integers(3, V, (B, K, T)).astype("int32")
    reference_ids = rng.integers(3, V, (B, TR)).astype("int32")
    return dict(
        log_probs=log_probs,
        token_mask=token_mask,
        candidate_mask=candidate_mask,
        costs=costs,
        reference_log_probs=reference_log_probs,
        reference_mask=reference_mask,
        ids=ids,
        reference_ids=reference_ids,
    )


def loss_of(case, log_probs=None, reference_log_probs=None, **kwargs):
    """`minimum_risk_loss` of `case`, its costs given by a cost function."""
    costs = case["costs"]
    return ka.minimum_risk_loss(
        case["log_probs"] if log_probs is None else log_probs,
        case["ids"],
        case["reference_ids"],
        token_mask=case["token_mask"],
        candidate_mask=case["candidate_mask"],
        cost=lambda candidates, references: ops.convert_to_tensor(costs),
        reference_log_probs=(
            case["reference_log_probs"]
            if reference_log_probs is None
            else reference_log_probs
        ),
        reference_mask=case["reference_mask"],
        **kwargs,
    )


def expected_of(case, **kwargs):
    return reference_loss(
        case["log_probs"],
        case["token_mask"],
        case["candidate_mask"],
        case["costs"],
        reference_log_probs=case["reference_log_probs"],
        reference_mask=case["reference_mask"],
        **kwargs,
    )


@pytest.mark.parametrize("alpha", [1.0, 0.3, 5.0])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_the_expected_cost_matches_the_formula(alpha, reduction):
    case = random_case()
    got = loss_of(case, alpha=alpha, reduction=reduction)
    want = expected_of(case, alpha=alpha, reduction=reduction)
    np.testing.assert_allclose(np_(got), want, rtol=1e-5)


@pytest.mark.parametrize("nll_weight", [0.3, 1.0])
def test_the_mix_with_the_reference_nll_matches_the_formula(nll_weight):
    case = random_case(1)
    got = loss_of(case, alpha=0.5, nll_weight=nll_weight, reduction="none")
    want = expected_of(case, alpha=0.5, nll_weight=nll_weight, reduction="none")
    np.testing.assert_allclose(np_(got), want, rtol=1e-5)
    if nll_weight == 1.0:  # The risk is gone: the mean token NLL alone.
        tokens = [
            case["reference_log_probs"][b][case["reference_mask"][b]] for b in range(B)
        ]
        np.testing.assert_allclose(np_(got), [-t.mean() for t in tokens], rtol=1e-5)


@pytest.mark.parametrize("alpha", [1.0, 3.0])
@pytest.mark.parametrize("cost_scale", [1.0, 100.0])
def test_length_normalized_scores_and_scaled_costs_match_the_formula(alpha, cost_scale):
    case = random_case(7)
    kwargs = dict(alpha=alpha, length_normalize=True, cost_scale=cost_scale)
    got = loss_of(case, reduction="none", **kwargs)
    want = expected_of(case, reduction="none", **kwargs)
    np.testing.assert_allclose(np_(got), want, rtol=1e-5)
    # The lengths differ, so normalizing changes Q and the loss.
    plain = expected_of(case, reduction="none", alpha=alpha, cost_scale=cost_scale)
    assert np.max(np.abs(want - plain)) > 1e-3


def test_length_normalization_weighs_by_the_mean_token_log_probability():
    # Two candidates: 1 token at probability 1/4 (sum log 1/4, mean log 1/4)
    # and 4 tokens at 1/2 each (sum log 1/16, mean log 1/2). Summed, the
    # short one has Q = (1/4) / (1/4 + 1/16) = 4/5; normalized, the long one
    # has Q = (1/2) / (1/2 + 1/4) = 2/3.
    log_probs = np.log([[[0.25, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]]])
    token_mask = np.array([[[True, False, False, False], [True] * 4]])
    costs = np.array([[0.3, 0.9]])

    def loss(**kwargs):
        return float(
            ka.minimum_risk_loss(
                log_probs,
                np.full((1, 2, 4), 5, "int32"),
                np.array([[5, END]], "int32"),
                token_mask=token_mask,
                cost=lambda c, r: ops.convert_to_tensor(costs),
                **kwargs,
            )
        )

    np.testing.assert_allclose(loss(), 0.8 * 0.3 + 0.2 * 0.9, rtol=1e-6)
    np.testing.assert_allclose(
        loss(length_normalize=True), (0.3 + 2 * 0.9) / 3, rtol=1e-6
    )
    np.testing.assert_allclose(
        loss(length_normalize=True, cost_scale=100.0), 100 * 0.7, rtol=1e-6
    )


def test_fairseqs_combined_loss_on_the_0_100_scale():
    # (1 - a) * 100 * risk + a * NLL: the mix of Edunov et al.'s recipe.
    case = random_case(8)
    kwargs = dict(length_normalize=True, cost_scale=100.0, nll_weight=0.5)
    got = np_(loss_of(case, reduction="none", **kwargs))
    risk = expected_of(case, reduction="none", length_normalize=True)
    nll = np.array(
        [
            -case["reference_log_probs"][b][case["reference_mask"][b]].mean()
            for b in range(B)
        ]
    )
    np.testing.assert_allclose(got, 0.5 * 100 * risk + 0.5 * nll, rtol=1e-5)


def test_whole_distributions_are_taken_at_the_candidates():
    case = random_case(2)
    rng = np.random.default_rng(2)
    distributions = np.log(rng.dirichlet(np.ones(V), (B, K, T)))
    reference_distributions = np.log(rng.dirichlet(np.ones(V), (B, TR)))
    taken = np.take_along_axis(distributions, case["ids"][..., None], -1)[..., 0]
    reference_taken = np.take_along_axis(
        reference_distributions, case["reference_ids"][..., None], -1
    )[..., 0]
    got = loss_of(case, distributions, reference_distributions, nll_weight=0.2)
    want = loss_of(case, taken, reference_taken, nll_weight=0.2)
    np.testing.assert_allclose(np_(got), np_(want), rtol=1e-6)


def test_the_worked_example_with_the_default_masks_and_rouge_cost(compiled):
    # Every scored token (the end token included) has probability 1/2, so
    # log p = (4, 3, 2) log 1/2 and Q = (1, 2, 4) / 7. The costs are 1 - the
    # mean of ROUGE-1, -2 and -L F1: 0 for the reference itself; [5, 6]
    # against [5, 7, 8]: 1 - (2/5 + 0 + 2/5) / 3 = 11/15; [9]: 1.
    candidates = np.array([[[5, 7, 8, END], [5, 6, END, PAD], [9, END, 9, 9]]])
    reference = np.array([[5, 7, 8, END, PAD]])
    log_probs = np.log(np.full((1, 3, 4), 0.5))
    loss = compiled(ka.minimum_risk_loss, end_id=END)(log_probs, candidates, reference)
    np.testing.assert_allclose(np_(loss), (2 * 11 / 15 + 4 * 1.0) / 7, rtol=1e-6)


def test_missing_candidates_get_no_weight():
    case = random_case(3)
    changed = dict(case, costs=case["costs"].copy(), log_probs=case["log_probs"].copy())
    missing = ~case["candidate_mask"]
    assert missing.any()
    # Whatever a missing candidate holds (NaN included) changes nothing.
    changed["costs"][missing] = np.nan
    changed["log_probs"][missing] = np.nan
    np.testing.assert_allclose(
        np_(loss_of(changed, reduction="none")),
        np_(loss_of(case, reduction="none")),
        rtol=1e-6,
    )
    # A candidate the model gives probability 0 is missing too.
    impossible = dict(case, log_probs=case["log_probs"].copy())
    impossible["log_probs"][missing.nonzero()[0], missing.nonzero()[1], 0] = -np.inf
    np.testing.assert_allclose(
        np_(loss_of(dict(impossible, candidate_mask=np.ones((B, K), bool)))),
        np_(loss_of(case)),
        rtol=1e-6,
    )


def test_a_source_without_candidates_has_risk_zero_and_finite_gradients(gradient):
    case = random_case(4)
    case["candidate_mask"][1] = False
    losses = np_(loss_of(case, reduction="none"))
    assert losses[1] == 0.0
    np.testing.assert_allclose(losses, expected_of(case, reduction="none"), rtol=1e-5)
    (grad,) = gradient(
        lambda lp: loss_of(case, lp), case["log_probs"].astype("float32")
    )
    assert np.all(np.isfinite(grad)) and np.all(grad[1] == 0)


def test_masked_tokens_change_nothing_even_at_minus_inf():
    case = random_case(5)
    changed = dict(case, log_probs=case["log_probs"].copy())
    changed["log_probs"][~case["token_mask"]] = -np.inf
    np.testing.assert_allclose(
        np_(loss_of(changed, alpha=2.0)), np_(loss_of(case, alpha=2.0)), rtol=1e-6
    )


def finite_differences(fn, x, eps=1e-6):
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[index] += eps
        down[index] -= eps
        grad[index] = (fn(up) - fn(down)) / (2 * eps)
    return grad


@pytest.mark.parametrize(
    "alpha, nll_weight, normalized",
    [(1.0, 0.0, False), (0.5, 0.3, False), (2.0, 0.5, True)],
)
def test_gradients_match_finite_differences(
    alpha, nll_weight, normalized, gradient, precise_dtype
):
    case = random_case(6)
    names = ["log_probs", "reference_log_probs"] if nll_weight else ["log_probs"]
    kwargs = dict(alpha=alpha, nll_weight=nll_weight, length_normalize=normalized)
    if normalized:
        kwargs["cost_scale"] = 100.0

    def reference(name, x):
        return expected_of(dict(case, **{name: x}), **kwargs)

    want = [
        finite_differences(lambda x, name=name: reference(name, x), case[name])
        for name in names
    ]
    got = gradient(
        lambda *xs: loss_of(case, *xs, **kwargs),
        *(case[name].astype(precise_dtype) for name in names),
    )
    tolerance = 1e-7 if precise_dtype == "float64" else 1e-5
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=tolerance)
    # Masked tokens and missing candidates get no gradient.
    dead = ~case["token_mask"] | ~case["candidate_mask"][..., None]
    assert np.all(got[0][dead] == 0) and np.any(got[0] != 0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(alpha=0.0), r"`alpha` must be positive. Received: alpha=0.0"),
        (
            dict(length_normalize="yes"),
            r"`length_normalize` must be a Python bool. Received: "
            r"length_normalize='yes'",
        ),
        (dict(cost_scale=0.0), r"`cost_scale` must be .*Received: cost_scale=0.0"),
        (dict(cost_scale=float("inf")), r"cost_scale=inf"),
        (dict(nll_weight=1.5), r"nll_weight=1.5"),
        (dict(reduction="max"), r"reduction='max'"),
        (dict(nll_weight=0.5, reference_log_probs=None), "reference_log_probs"),
        (
            dict(cost=lambda c, r: ops.zeros((B,))),
            r"one cost per candidate, shape \(3, 4\). Received: shape \(3,\)",
        ),
        (dict(log_probs=np.zeros((B, K))), r"log_probs.shape=\(3, 4\)"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    case = random_case()
    arguments = dict(
        log_probs=case["log_probs"],
        reference_log_probs=case["reference_log_probs"],
        end_id=END,
    )
    arguments.update(kwargs)
    log_probs = arguments.pop("log_probs")
    with pytest.raises(ValueError, match=match):
        ka.minimum_risk_loss(log_probs, case["ids"], case["reference_ids"], **arguments)


# ------------------------------------------------------------------ training
# A teacher-forced model whose next token depends on the previous one and
# the source: `log_softmax(W[y_t-1] + U[source])`. Its step holds the
# source's row `U[source]` as the state, which `draw_candidates` tiles.

START, SOURCES, STEPS, ROUNDS = 1, 4, 6, 12
REFERENCES = np.array(
    [
        [3, 4, 5, END, PAD, PAD],
        [6, 3, END, PAD, PAD, PAD],
        [5, 6, 4, 3, END, PAD],
        [4, 6, END, PAD, PAD, PAD],
    ],
    "int32",
)


class BigramDecoder(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.previous = keras.layers.Embedding(V, V)
        self.source = keras.layers.Embedding(SOURCES, V)

    def call(self, inputs):
        logits = self.previous(inputs["target_in"])
        logits = logits + self.source(inputs["source"])[:, None]
        return ops.log_softmax(logits)

    def step(self, ids, state):
        return ops.log_softmax(self.previous(ids) + state), state

    def compute_loss(self, x, y, y_pred, sample_weight=None, training=True):
        candidates = y["candidates"]  # (batch, K, T): y_pred's rows b * K + k
        return ka.minimum_risk_loss(
            ops.reshape(y_pred, (-1, *candidates.shape[1:], V)),
            candidates,
            y["references"],
            token_mask=y["token_mask"],
            candidate_mask=y["candidate_mask"],
            end_id=END,
            pad_id=PAD,
        )


def test_training_with_minimum_risk_lowers_the_expected_cost():
    sources = np.arange(SOURCES, dtype="int32")
    starts = np.full((SOURCES,), START, "int32")
    model = BigramDecoder()
    model({"source": sources, "target_in": starts[:, None]})
    model.compile(optimizer=keras.optimizers.Adam(0.2))

    def draw(seed, count, references=None):
        return ka.draw_candidates(
            model.step, model.source(sources), starts, END, STEPS, count,
            reference_ids=references, seed=seed, banned_ids=[PAD, START],
        )  # fmt: skip

    def expected_cost():  # The same draws each time: one seed.
        samples = draw(1000, 16, None)
        costs = ka.rouge_cost(samples.ids, REFERENCES, end_id=END, pad_id=PAD)
        return float(ops.mean(costs))

    before = expected_cost()
    for seed in range(ROUNDS):
        candidates = draw(seed, 6, REFERENCES)
        ids = ops.reshape(candidates.ids, (-1, STEPS))
        start = ops.full((SOURCES * 6, 1), START, "int32")
        target_in = ops.concatenate([start, ids[:, :-1]], axis=1)
        model.train_on_batch(
            {"source": np.repeat(sources, 6), "target_in": target_in},
            {
                "candidates": candidates.ids,
                "references": REFERENCES,
                "token_mask": candidates.token_mask,
                "candidate_mask": candidates.candidate_mask,
            },
        )
    assert expected_cost() < before - 0.2
