"""Whether a trained model beats the lead baseline on validation.

After tuning, a run holds its chosen search against the lead baseline
(`models.scoring.baselines`) on the validation pairs it tuned on, on ROUGE-1,
ROUGE-2 and ROUGE-L: ROUGE-1 alone rewards a loop of frequent words
(`for for or for ...` recalls many unigrams), ROUGE-2 and ROUGE-L do not.
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


def compare(model_scores, lead_scores, lead_tokens, examples):
    """The `validation_check` record of a model's and the baseline's scores.

    Args:
        model_scores: the model's mean ROUGE F1 x 100 on validation, a dict
            holding `rouge1`, `rouge2` and `rougeL`.
        lead_scores: the lead baseline's, likewise.
        lead_tokens: the baseline's N.
        examples: the validation pairs scored.

    Returns:
        A dict: `split`, `examples`, `baseline` (`lead_<N>`), `model` and
        `lead_baseline` (each `{rouge1, rouge2, rougeL}`, rounded to two
        decimals) and `beats_lead_baseline`: whether the model scores
        higher on all three.

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
    return {
        "split": "validation",
        "examples": int(examples),
        "baseline": lead_name(lead_tokens),
        "model": model,
        "lead_baseline": lead,
        "beats_lead_baseline": all(model_scores[k] > lead_scores[k] for k in CHECKED),
    }


def validation_check(documents, references, model_scores, lead_tokens):
    """`compare` of `model_scores` with the lead baseline on the same pairs.

    Args:
        documents: the validation documents (str or bytes).
        references: their reference headlines (str).
        model_scores: the model's scores on them (a tuning row).
        lead_tokens: the baseline's N.
    """
    documents = [d.decode("utf-8") if isinstance(d, bytes) else d for d in documents]
    lead = mean_rouge(lead_baseline(documents, lead_tokens), references, list(CHECKED))
    return compare(model_scores, lead, lead_tokens, len(documents))


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
        f"document's first {check['baseline'].removeprefix('lead_')} tokens) on "
        f"all of ROUGE-1, ROUGE-2 and ROUGE-L: {scored}",
        "to try: more data; more training examples before stopping "
        "(--min-train-examples); longer lengths (--max-source-length, "
        "--max-target-length)",
    ]


def print_verdict(check, file=None):
    """Prints `verdict_lines(check)` as the command's last lines (stderr);
    nothing when no check was made."""
    for line in verdict_lines(check) if check else []:
        print(f"[train.py] {line}", file=file or sys.stderr)
