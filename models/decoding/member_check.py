"""Whether a distilled student beats its teacher's first member served alone.

A student of one model (`train.py --distill-from`, `--ensemble 1`) is
served at one model's cost, so the export it must beat is its teacher's
first member served alone with the same search. After tuning, that member
(read from the teacher's export, with the teacher's vocabulary) is scored
on the validation pairs the student was tuned on, each model as it would be
served: greedy search with the member's own end penalty, chosen by ROUGE-1
on the student's grid (the student's was chosen by its `--greedy-length`
rule); a beam with the student's tuned settings. The two are held on
ROUGE-1, ROUGE-2 and ROUGE-L: the student beats the member when its
ROUGE-1 is higher and neither its ROUGE-2 nor its ROUGE-L is lower. The
check is kept with the export (`training.json`, and `metrics.json` once
evaluated); the command's last lines say which of the two to serve, with
the command that exports the member.
"""

import shlex
import sys
from pathlib import Path

from models.decoding import tuning
from models.decoding.lead_check import CHECKED
from models.model.run_folder import load_run, load_trained_model
from models.settings.folder_layout import (
    CONFIG_FILE,
    MODEL_FILE,
    SEARCH_OPTIONS_FILE,
    VOCABULARY_FILE,
)


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

    >>> from models.settings.model import SearchOptions
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


def holds_member(teacher_dir):
    """Whether the teacher's export holds its trained model, config and
    vocabulary (every export of `train.py` does; any SavedModel with the
    signatures can teach)."""
    files = (CONFIG_FILE, VOCABULARY_FILE, MODEL_FILE)
    return all((Path(teacher_dir) / name).is_file() for name in files)


def check_member(teacher_dir, pairs, search, end_penalties, student):
    """`compare` of the student's served scores with its teacher's first
    member's.

    Args:
        teacher_dir: the teacher's export version folder (`--distill-from`).
        pairs: the validation `(document, reference)` pairs the student was
            tuned on (bytes).
        search: the student's chosen `SearchOptions`.
        end_penalties: greedy search's end penalties to choose the member's
            from (the student's grid); empty: the student's.
        student: the student's scores on `pairs` (its tuning's served row).
    """
    _, features = load_run(teacher_dir)
    member = load_trained_model(teacher_dir, members=1)
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


def export_command(check, teacher_dir, export_dir, version_dir):
    """The command that exports the member as it was scored: the student's
    search options (`version_dir`'s), the member's end penalty, into
    `<export_dir>-member`."""
    command = ["python", "-m", "models.export", "--run-dir", str(teacher_dir)]
    command += ["--export-dir", f"{export_dir}-member", "--members", "1"]
    command += ["--search-options", str(Path(version_dir) / SEARCH_OPTIONS_FILE)]
    if check["beam_size"] < 2:
        command += ["--greedy-end-penalty", repr(check["greedy_end_penalty"])]
    return shlex.join(command)


def verdict_lines(check, teacher_dir, export_dir, version_dir):
    """The command's last lines about `check` (without the `[train.py] `).

    Args:
        check: a `compare` record.
        teacher_dir: the teacher's export (`--distill-from`).
        export_dir: the student's export folder (`saved_models/<name>`); the
            member's is named after it.
        version_dir: the student's export version folder, whose search
            options the member was scored with.
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
    return [
        "THE STUDENT DOES NOT BEAT its teacher's first member served alone at "
        f"the same cost (higher ROUGE-1, ROUGE-2 and ROUGE-L not lower): {scored}",
        "serve the member instead: "
        + export_command(check, teacher_dir, export_dir, version_dir),
    ]


def print_verdict(check, teacher_dir, export_dir, version_dir, file=None):
    """Prints `verdict_lines` as the command's last lines (stderr)."""
    for line in verdict_lines(check, teacher_dir, export_dir, version_dir):
        print(f"[train.py] {line}", file=file or sys.stderr)
