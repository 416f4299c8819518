"""Whether a distilled student beats its teacher's first member served alone.

A student (`train.py --distill-from`) starts from its teacher's first member
and is served at one model's cost, so the export it must beat is that
member served alone with the same search. After tuning, the member is
scored on the validation pairs the student was tuned on, with the
student's search (greedy: its own end penalty, chosen on the same grid, so
that each model gets its best setting), and the two are held on ROUGE-1,
ROUGE-2 and ROUGE-L. The student beats the member when its ROUGE-1 is
higher and neither its ROUGE-2 nor its ROUGE-L is lower. The check is kept
with the export (`training.json`, and `metrics.json` once evaluated); the
command's last lines say which of the two to serve, with the command that
exports the member.
"""

import sys

import keras

from models import tuning
from models.lead_check import CHECKED


def compare(student_scores, member_scores, examples, member_search):
    """The `member_check` record of a student's and its member's scores.

    Args:
        student_scores: the student's mean ROUGE F1 x 100 on validation, a
            dict holding `rouge1`, `rouge2` and `rougeL`.
        member_scores: the member's, likewise.
        examples: the validation pairs scored.
        member_search: the member's `SearchOptions` (its end penalty).

    Returns:
        A dict: `split`, `examples`, `student` and `member` (each `{rouge1,
        rouge2, rougeL}`, rounded to two decimals), the member's `beam_size`
        and `greedy_end_penalty`, and `beats_member`.

    Example:

    >>> from models.config import SearchOptions
    >>> check = compare(
    ...     {"rouge1": 43.1, "rouge2": 21.0, "rougeL": 40.2},
    ...     {"rouge1": 42.0, "rouge2": 21.3, "rougeL": 39.9},
    ...     500,
    ...     SearchOptions(beam_size=1),
    ... )
    >>> check["beats_member"]  # higher ROUGE-1, but a lower ROUGE-2
    False
    """
    student = {k: round(float(student_scores[k]), 2) for k in CHECKED}
    member = {k: round(float(member_scores[k]), 2) for k in CHECKED}
    return {
        "split": "validation",
        "examples": int(examples),
        "student": student,
        "member": member,
        "beam_size": int(member_search.beam_size),
        "greedy_end_penalty": float(member_search.greedy_end_penalty),
        "beats_member": student["rouge1"] > member["rouge1"]
        and all(student[k] >= member[k] for k in ("rouge2", "rougeL")),
    }


def check_member(member_file, features, pairs, search, end_penalties, student):
    """`compare` of the student's served scores with its starting member's.

    Args:
        member_file: the member's `model.keras` (`--init-from`'s first).
        features: the run's `TextFeatures` (the student shares the member's
            vocabulary).
        pairs: the validation `(document, reference)` pairs the student was
            tuned on (bytes).
        search: the student's chosen `SearchOptions`.
        end_penalties: greedy search's end penalties to try for the member
            (the student's grid); empty: the student's.
        student: the student's scores on `pairs` (its tuning's served row).
    """
    member = keras.saving.load_model(member_file, compile=False)
    documents = [d for d, _ in pairs]
    references = [s.decode("utf-8") for _, s in pairs]
    sample = (member, features, documents, references)
    if search.beam_size < 2:
        penalties = list(end_penalties) or [search.greedy_end_penalty]
        chosen, rows = tuning.tune_greedy_end_penalty(*sample, search, penalties)
        row = tuning.chosen_row(rows, chosen, tuning.GREEDY_KEYS)
    else:
        chosen, rows = tuning.tune_search_options(
            *sample, search, [search.length_penalty], [search.no_repeat_ngram_size]
        )
        row = rows[0]
    return compare(student, row, len(pairs), chosen)


def _scores(scores):
    return " / ".join(f"{scores[k]:.2f}" for k in CHECKED)


def verdict_lines(check, member_source, export_dir):
    """The command's last lines about `check` (without the `[train.py] `).

    Args:
        check: a `compare` record.
        member_source: where the member was read (`--init-from`: the
            teacher's export or run folder).
        export_dir: the student's export folder (`saved_models/<name>`); the
            member's is named after it.
    """
    metrics = "/".join(CHECKED.values())
    scored = (
        f"{metrics} {_scores(check['student'])} against the member's "
        f"{_scores(check['member'])} on {check['examples']} validation examples"
    )
    if check["beats_member"]:
        return [
            "the student beats its teacher's first member served alone at the "
            f"same cost: {scored}"
        ]
    search = f"--beam-size {check['beam_size']}"
    if check["beam_size"] < 2:
        search += f" --greedy-end-penalty {check['greedy_end_penalty']:g}"
    return [
        "THE STUDENT DOES NOT BEAT its teacher's first member served alone at "
        f"the same cost (higher ROUGE-1, ROUGE-2 and ROUGE-L not lower): {scored}",
        "serve the member instead: python -m models.export --run-dir "
        f"{member_source} --export-dir {export_dir}-member --members 1 {search}",
    ]


def print_verdict(check, member_source, export_dir, file=None):
    """Prints `verdict_lines` as the command's last lines (stderr)."""
    for line in verdict_lines(check, member_source, export_dir):
        print(f"[train.py] {line}", file=file or sys.stderr)
