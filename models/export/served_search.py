"""The search an export serves, chosen on validation, and how it compares.

After training, `train.py` tunes the search on validation pairs (beam
search's length penalty and n-gram blocking, greedy search's end penalty:
`models.decoding.tuning`), holds the chosen search against the lead baseline on the
same pairs (`models.decoding.lead_check`) and, for a distilled student, against its
teacher's first member served alone at the same cost (`models.decoding.member_check`).
The checks are kept with the export; the command's last lines say what they
found.
"""

import dataclasses
import sys

from models.decoding import lead_check, member_check, tuning
from models.scoring.baselines import recorded_lead_tokens
from models.settings.folder_layout import SEARCH_TUNING_FILE
from models.settings.json_files import write_json
from models.settings.train import TrainSettings, TuningSettings
from models.training import distill


def choose(settings: TrainSettings, model, features, validation, search, run_dir):
    """The served search and its checks, as `train.py`'s settings say.

    Args:
        settings: the command's settings.
        model: the trained model (an ensemble's, or one member).
        features: the run's `TextFeatures`.
        validation: the validation split, `(document, summary)` pairs.
        search: the `SearchOptions` to tune from.
        run_dir: the run folder (`search_tuning.json` goes there).

    Returns:
        `(search, checks)`: the chosen `SearchOptions`, and a dict holding
        `validation_check` (`models.decoding.lead_check`) and, for a student of one
        model, `member_check` (`models.decoding.member_check`); empty without
        validation pairs.
    """
    tuning_settings = settings.tuning
    pairs = list(validation.take(tuning_settings.tune_examples).as_numpy_iterator())
    if not pairs:
        return search, {}
    teacher = settings.distillation.distill_from
    search, check = tune_decoding(
        tuning_settings,
        model,
        features,
        pairs,
        search,
        run_dir,
        teacher if tuning_settings.greedy_length == "teacher" else None,
    )
    checks = {"validation_check": check}
    # One model at one model's cost: a student that is an ensemble again
    # (`--ensemble 3`) is not served at its member's cost.
    if teacher and settings.training.ensemble == 1:
        if not member_check.holds_member(teacher):
            print(
                f"{teacher} holds no trained model (config.json, vocab.txt, "
                "model.keras): the student is not compared with a member",
                file=sys.stderr,
            )
            return search, checks
        print(
            "Scoring the teacher's first member alone, with the same search",
            file=sys.stderr,
        )
        tuned = tuning_settings.tune_decoding
        checks["member_check"] = member_check.check_member(
            teacher,
            pairs,
            search,
            tuning_settings.tune_end_penalties if tuned else [],
            check["model"],
        )
    return search, checks


def print_verdicts(checks, settings: TrainSettings, version_dir):
    """The command's last lines about `choose`'s checks (stderr); the
    member's export command reads the student's `version_dir`."""
    lead_check.print_verdict(checks.get("validation_check"))
    if "member_check" in checks:
        member_check.print_verdict(
            checks["member_check"],
            settings.distillation.distill_from,
            settings.run.export_path(),
            version_dir,
        )


def tune_decoding(
    settings: TuningSettings, model, features, pairs, search, run_dir, teacher
):
    """`search` with the validation-best length penalty and n-gram blocking,
    and greedy search's end penalty (with `tune_decoding` off: `search` as
    given, scored alone) on the validation `pairs` (bytes); and how the
    chosen search compares with the lead baseline on them
    (`models.decoding.lead_check`). With `teacher` (an export) the end penalty keeps
    the teacher's mean length instead."""
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
    write_json(
        run_dir / SEARCH_TUNING_FILE, {"chosen": dataclasses.asdict(chosen), **record}
    )
    return chosen, check
