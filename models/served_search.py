"""The search an export serves, chosen on validation, and how it compares.

After training, `train.py` tunes the search on validation pairs (beam
search's length penalty and n-gram blocking, greedy search's end penalty:
`models.tuning`), holds the chosen search against the lead baseline on the
same pairs (`models.lead_check`) and, for a distilled student, against its
teacher's first member served alone at the same cost (`models.member_check`).
The checks are kept with the export; the command's last lines say what they
found.
"""

import dataclasses
import json
import sys

from models import distill, lead_check, member_check, tuning
from models.baselines import recorded_lead_tokens
from models.folder_layout import SEARCH_TUNING_FILE
from models.train_settings import TrainSettings, TuningSettings


def choose(
    settings: TrainSettings,
    model,
    features,
    validation,
    search,
    run_dir,
    initial_weights,
    progress,
):
    """The served search and its checks, as `train.py`'s settings say.

    Args:
        settings: the command's settings.
        model: the trained model (an ensemble's, or one member).
        features: the run's `TextFeatures`.
        validation: the validation split, `(document, summary)` pairs.
        search: the `SearchOptions` to tune from.
        run_dir: the run folder (`search_tuning.json` goes there).
        initial_weights: `{rank: model.keras}` the members started from
            (`--init-from`); a distilled student of one model is held
            against the one it started from.
        progress: the command's `CommandProgress`.

    Returns:
        `(search, checks)`: the chosen `SearchOptions`, and a dict holding
        `validation_check` (`models.lead_check`) and, for a student,
        `member_check` (`models.member_check`); empty without validation
        pairs.
    """
    progress.stage("tuning", "the search's settings, on validation")
    distillation = settings.distillation
    teacher = distillation.distill_from
    search, check = tune_decoding(
        settings.tuning,
        model,
        features,
        validation,
        search,
        run_dir,
        teacher if settings.tuning.greedy_length == "teacher" else None,
    )
    if check is None:
        return search, {}
    checks = {"validation_check": check}
    # One model at one model's cost: a student that is an ensemble again
    # (`--ensemble 3`) is not served at its member's cost.
    if teacher and len(initial_weights) == 1:
        progress.stage("tuning", "the teacher's first member alone, at the same cost")
        checks["member_check"] = member_check.check_member(
            initial_weights[0],
            features,
            list(validation.take(check["examples"]).as_numpy_iterator()),
            search,
            settings.tuning.tune_end_penalties,
            check["model"],
        )
    return search, checks


def print_verdicts(checks, settings: TrainSettings):
    """The command's last lines about `choose`'s checks (stderr)."""
    lead_check.print_verdict(checks.get("validation_check"))
    if "member_check" in checks:
        member_check.print_verdict(
            checks["member_check"],
            settings.distillation.init_from,
            settings.run.export_path(),
        )


def tune_decoding(
    settings: TuningSettings, model, features, validation, search, run_dir, teacher
):
    """`search` with the validation-best length penalty and n-gram blocking,
    and greedy search's end penalty (with `tune_decoding` off: `search` as
    given, scored alone); and how the chosen search compares with the lead
    baseline on the same pairs (`models.lead_check`). With `teacher` (an
    export) the end penalty keeps the teacher's mean length instead."""
    pairs = list(validation.take(settings.tune_examples).as_numpy_iterator())
    if not pairs:
        return search, None
    tune = settings.tune_decoding
    what = "Tuning the length penalty and n-gram blocking" if tune else "Scoring"
    print(f"{what} on {len(pairs)} validation examples", file=sys.stderr)
    sample = (model, features, [d for d, _ in pairs], [s.decode() for _, s in pairs])
    grids = (
        (settings.tune_length_penalties, settings.tune_ngram_sizes)
        if tune
        else ([search.length_penalty], [search.no_repeat_ngram_size])
    )
    chosen, rows = tuning.tune_search_options(*sample, search, *grids)
    print(tuning.format_rows(rows, chosen), file=sys.stderr)
    record = {"grid": rows}
    if tune and settings.tune_end_penalties:
        print("Tuning greedy search's end penalty", file=sys.stderr)
        target = None
        if teacher is not None:
            target = distill.mean_headline_length(teacher, sample[2])
            print(f"the teacher's mean length: {target:.2f} tokens", file=sys.stderr)
            record["teacher_mean_length"] = target
        chosen, greedy_rows = tuning.tune_greedy_end_penalty(
            *sample, chosen, settings.tune_end_penalties, target_length=target
        )
        print(tuning.format_greedy_rows(greedy_rows, chosen), file=sys.stderr)
        record["greedy_grid"] = greedy_rows
    served = tuning.served_row(rows, record.get("greedy_grid"), chosen)
    record["chosen_at_max_length"] = served["at_max_length"]
    check = lead_check.validation_check(
        sample[2], sample[3], served, recorded_lead_tokens(run_dir)
    )
    (run_dir / SEARCH_TUNING_FILE).write_text(
        json.dumps({"chosen": dataclasses.asdict(chosen), **record}, indent=2) + "\n"
    )
    return chosen, check
