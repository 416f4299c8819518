"""Whether a trained model beats the strongest lead baseline on validation.

After tuning, a run holds its chosen search against the lead baseline
(`models.scoring.baselines`) on the validation pairs it tuned on, on ROUGE-1,
ROUGE-2 and ROUGE-L: ROUGE-1 alone rewards a loop of frequent words
(`for for or for ...` recalls many unigrams), ROUGE-2 and ROUGE-L do not.
The baseline is the strongest of the first-N-tokens baselines for N around
the training headlines' median (`lead_candidates`): the one with the best
mean of the three on those pairs (`strongest_lead`), so a model is not held
against a lead the data's lengths made weak.
The check is kept with the export (`training.json`, and `metrics.json`
once evaluated) and shown by the server (`serving`, which reads it
from `training.json`); when the model does not beat the
baseline on all three, the command's last lines say so and what to try.
"""

import sys

from models.scoring.baselines import lead_baseline, lead_name
from models.scoring.metrics import mean_rouge

# The metrics a model must beat the baseline on, and their short names.
CHECKED = {"rouge1": "R1", "rouge2": "R2", "rougeL": "RL"}


def lead_candidates(median_tokens):
    """The lead baseline's Ns tried: half the median to twice it, >= 1.

    Twice: on Gigaword's text the strongest lead is near twice the median
    headline length (`docs/history.md`).

    Example:

    >>> list(lead_candidates(3))
    [1, 2, 3, 4, 5, 6]
    """
    return range(max(1, median_tokens // 2), 2 * median_tokens + 1)


def strongest_lead(documents, references, candidates):
    """The first-N-tokens baseline with the best mean of ROUGE-1/2/L.

    Args:
        documents: the documents (str).
        references: their reference headlines (str).
        candidates: the Ns to try, in order; a tie keeps the first.

    Returns:
        `(n, scores, means)`: the chosen N, its mean ROUGE F1 x 100 of each
        checked type, and each N's mean of the three, `{n: mean}`.
    """
    best, means = None, {}
    for n in candidates:
        scores = mean_rouge(lead_baseline(documents, n), references, list(CHECKED))
        means[n] = sum(scores[k] for k in CHECKED) / len(CHECKED)
        if best is None or means[n] > means[best[0]]:
            best = (n, scores)
    if best is None:
        raise ValueError("`candidates` must hold at least one N. Received: none")
    return best[0], best[1], means


def compare(model_scores, lead_scores, lead_tokens, examples, lead_means=None):
    """The `validation_check` record of a model's and the baseline's scores.

    Args:
        model_scores: the model's mean ROUGE F1 x 100 on validation, a dict
            holding `rouge1`, `rouge2` and `rougeL`.
        lead_scores: the lead baseline's, likewise.
        lead_tokens: the baseline's N.
        examples: the validation pairs scored.
        lead_means: optional `{n: mean of the three}` of each N tried.

    Returns:
        A dict: `split`, `examples`, `baseline` (`lead_<N>`), `lead_tokens`
        (N), `model` and `lead_baseline` (each `{rouge1, rouge2, rougeL}`,
        rounded to two decimals), `beats_lead_baseline`: whether the model
        scores higher on all three, and with `lead_means`, `lead_choice`:
        `{lead_<n>: mean}`.

    Example:

    >>> check = compare(
    ...     {"rouge1": 30.2, "rouge2": 3.1, "rougeL": 19.2},
    ...     {"rouge1": 27.5, "rouge2": 12.5, "rougeL": 25.3},
    ...     8,
    ...     500,
    ... )
    >>> check["beats_lead_baseline"]
    False
    """
    model = {k: round(float(model_scores[k]), 2) for k in CHECKED}
    lead = {k: round(float(lead_scores[k]), 2) for k in CHECKED}
    check = {
        "split": "validation",
        "examples": int(examples),
        "baseline": lead_name(lead_tokens),
        "lead_tokens": int(lead_tokens),
        "model": model,
        "lead_baseline": lead,
        "beats_lead_baseline": all(model_scores[k] > lead_scores[k] for k in CHECKED),
    }
    if lead_means is not None:
        check["lead_choice"] = {
            lead_name(n): round(float(m), 2) for n, m in lead_means.items()
        }
    return check


def validation_check(documents, references, model_scores, median_tokens):
    """`compare` of `model_scores` with the strongest lead baseline on the
    same pairs (`strongest_lead` over `lead_candidates(median_tokens)`).

    Args:
        documents: the validation documents (str or bytes).
        references: their reference headlines (str).
        model_scores: the model's scores on them (a tuning row).
        median_tokens: the training headlines' median length, the centre of
            the Ns tried.
    """
    documents = [d.decode("utf-8") if isinstance(d, bytes) else d for d in documents]
    n, lead, means = strongest_lead(
        documents, references, lead_candidates(median_tokens)
    )
    return compare(model_scores, lead, n, len(documents), means)


def _scores(scores):
    return " / ".join(f"{scores[k]:.2f}" for k in CHECKED)


def verdict_lines(check):
    """The command's last lines about `check` (without the `[train.py] `).

    One line when the model beats the baseline; when it does not, what each
    scored and what to try.
    """
    metrics = "/".join(CHECKED.values())
    scored = (
        f"{metrics} {_scores(check['model'])} against the "
        f"{check['baseline']} baseline's {_scores(check['lead_baseline'])} on "
        f"{check['examples']} validation examples"
    )
    if check["beats_lead_baseline"]:
        return [f"beats the lead baseline: {scored}"]
    return [
        "NOT TRAINED ENOUGH: the model does not beat the lead baseline (the "
        f"document's first {check['baseline'].removeprefix('lead_')} tokens, "
        "the strongest such N on validation) on all of ROUGE-1, ROUGE-2 and "
        f"ROUGE-L: {scored}",
        "to try: more data; more training examples before stopping "
        "(--min-train-examples); longer lengths (--max-source-length, "
        "--max-target-length)",
    ]


def print_verdict(check, file=None):
    """Prints `verdict_lines(check)` as the command's last lines (stderr);
    nothing when no check was made."""
    for line in verdict_lines(check) if check else []:
        print(f"[train.py] {line}", file=file or sys.stderr)
