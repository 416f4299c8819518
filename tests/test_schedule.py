"""The schedule counted in training examples (`models.training.schedule`),
the minimum-risk stage's counted in updates, worked out by hand, and the
time left that `models.training.progress` estimates from them."""

import io
import json
import re

import pytest

from models.settings.errors import UserError
from models.settings.fit import TrainOptions
from models.settings.risk import RiskOptions
from models.training.progress import AFTER_TRAINING_INTERVALS, CommandProgress
from models.training.schedule import (
    RiskSchedule,
    Schedule,
    check_run_folder,
    interval_batches,
    run_schedule,
)


def _schedule(pass_batches, **options):
    return Schedule.make(TrainOptions(**options), pass_batches)


@pytest.mark.parametrize(
    "pass_batches, expected",
    [
        # The Gigaword sample, 26,063 pairs: 391 nominal batches (25,000 /
        # 64 = 390.6); a pass of 408 (410 as bucketed) is one share of 1.04.
        (408, 408),
        (410, 410),
        # 2,900 pairs: a pass of 48 batches; 391 / 48 = 8.15 passes -> 8.
        (48, 384),
        # 3.8M pairs: 59,441 / 391 = 152.02 shares -> 152 of 391.06 batches.
        (59_441, 391),
        # Two shares: 800 / 391 = 2.05 -> 2 of 400.
        (800, 400),
        # Just above half a nominal interval: 196 <= 391, 391 / 196 = 1.99.
        (196, 392),
        # Exactly the nominal interval: one pass.
        (391, 391),
    ],
)
def test_interval_rule_worked_out_by_hand(pass_batches, expected):
    assert interval_batches(pass_batches, 64, 25_000) == expected


def test_interval_rule_rounds_halves_up_and_is_at_least_one_batch():
    # 24 / 8 = 3 nominal; a pass of 2 batches: 3 / 2 = 1.5 passes -> 2.
    assert interval_batches(2, 8, 24) == 4
    # A pass of 5: 5 / 3 = 1.67 -> 2 shares of 2.5 -> 3 batches.
    assert interval_batches(5, 8, 24) == 3
    # Fewer examples than a batch: one batch.
    assert interval_batches(7, 64, 10) == 1
    with pytest.raises(UserError, match=r"Received: pass_batches=0"):
        interval_batches(0, 64, 25_000)


@pytest.mark.parametrize(
    "pass_batches, interval_examples, min_validations, max_validations",
    [
        # 410 * 64 = 26,240 examples: 250,000 / 26,240 = 9.53 -> 10;
        # 20,000,000 / 26,240 = 762.2 -> 763.
        (410, 26_240, 10, 763),
        # 384 * 64 = 24,576: 10.17 -> 11; 813.8 -> 814.
        (48, 24_576, 11, 814),
        # 391 * 64 = 25,024: 9.99 -> 10; 799.2 -> 800.
        (59_441, 25_024, 10, 800),
    ],
)
def test_limits_in_validations(
    pass_batches, interval_examples, min_validations, max_validations
):
    schedule = _schedule(pass_batches)
    assert schedule.interval_examples == interval_examples
    assert schedule.min_validations == min_validations
    assert schedule.max_validations == max_validations
    assert schedule.examples(3) == 3 * interval_examples


def test_the_minimum_never_exceeds_the_limit():
    schedule = _schedule(10, batch_size=8, validate_every=80, train_examples=160)
    assert (schedule.max_validations, schedule.min_validations) == (2, 2)
    schedule = _schedule(10, batch_size=8, validate_every=80, min_train_examples=0)
    assert schedule.min_validations == 0


def test_finished_when_stopped_early_or_at_the_limit():
    schedule = _schedule(410)
    assert not schedule.finished(17, early_stopped=False)
    assert schedule.finished(17, early_stopped=True)
    assert not schedule.finished(762, early_stopped=False)
    assert schedule.finished(763, early_stopped=False)
    assert not schedule.may_stop(9)
    assert schedule.may_stop(10)


def test_where_the_stream_resumes():
    # One interval a pass: validation 3 ends pass 2.
    assert _schedule(410).start(3) == (3, 0)
    # 200 intervals of 391 = 78,200 batches = pass 1 and 18,759 of pass 2.
    assert _schedule(59_441).start(200) == (1, 18_759)
    # Three batches an interval, five a pass: validation 3 is at batch 9,
    # the fifth of pass 1 (from 0): mid-pass.
    tiny = _schedule(5, batch_size=8, validate_every=24)
    assert tiny.interval_batches == 3
    assert tiny.start(3) == (1, 4)


def test_the_run_folder_keeps_its_schedule(tmp_path):
    options = TrainOptions(validate_every=1000, batch_size=8)
    # 125 nominal batches: 2.5 passes of 50 -> 3.
    made = run_schedule(tmp_path, options, pass_batches=50)
    recorded = json.loads((tmp_path / "schedule.json").read_text())
    assert recorded["interval_batches"] == made.interval_batches == 150
    assert recorded["max_validations"] == made.max_validations
    # The same command reads it back.
    assert run_schedule(tmp_path, options, pass_batches=50) == made
    # Another interval, or other data, is refused in one line.
    other = TrainOptions(validate_every=500, batch_size=8)
    with pytest.raises(UserError, match=r"^`validate_every` must be 1000, .*") as e:
        run_schedule(tmp_path, other, pass_batches=50)
    assert str(e.value).endswith("Received: validate_every=500")
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match=r"Received: pass_batches=51$"):
        run_schedule(tmp_path, options, pass_batches=51)


def test_a_run_folder_trained_in_epochs_is_refused(tmp_path):
    check_run_folder(tmp_path)  # a new folder
    (tmp_path / "train_options.json").write_text(json.dumps({"epochs": 60}))
    with pytest.raises(UserError, match=r"trained in epochs.*--run-dir"):
        check_run_folder(tmp_path)


def _progress(schedule, members=3):
    stream = io.StringIO()
    progress = CommandProgress(members, stream=stream)
    progress.training(schedule)
    return progress, stream


def _left(stream):
    line = stream.getvalue().splitlines()[-1]
    return re.search(r"about (\d+) (min|s) left", line).groups()


def test_time_left_covers_the_whole_schedule():
    # The sample's schedule: at least 10 validations, patience 5.
    schedule = _schedule(410)
    progress, stream = _progress(schedule)
    # Member 1 at validation 4, best at 4: it can stop at 10 at the
    # earliest, and the others are taken to need 10 + 5 = 15 each.
    for v in range(1, 5):
        progress.validation(0, v, 60.0, 20.0 + v, 20.0 + v, v, "val_rouge1")
    assert progress.intervals_left(0, 4) == (15 - 4) + 2 * 15
    # One minute an interval, with the stages after training.
    assert _left(stream) == (str(41 + AFTER_TRAINING_INTERVALS), "min")
    assert "member 1/3, validation 4 (104,960 examples): ROUGE-1 24.00" in (
        stream.getvalue()
    )
    # Member 1 finished after 17; member 2, at 3 (best at 2), is taken to
    # need as many, and member 3 too.
    progress.member_done(0, 17)
    for v in range(1, 4):
        progress.validation(1, v, 60.0, 20.0, 20.0, min(v, 2), "val_rouge1")
    assert progress.intervals_left(1, 2) == (17 - 3) + 17
    # Past them, its own patience rules: best at 18, so 23 at least.
    progress.validation(1, 20, 60.0, 30.0, 31.0, 18, "val_rouge1")
    assert progress.intervals_left(1, 18) == (23 - 20) + 17


def test_time_left_on_small_data_counts_intervals_not_passes():
    # 2,900 pairs: an interval is 8 passes; it takes as long as the
    # sample's one pass, and the estimate counts it once.
    schedule = _schedule(48)
    progress, stream = _progress(schedule, members=1)
    progress.validation(0, 1, 120.0, 18.0, 18.0, 1, "val_rouge1")
    # At least 11 validations, patience 5: 16 - 1 = 15 left, then the
    # stages after training, two minutes each.
    assert progress.intervals_left(0, 1) == 15
    assert _left(stream) == (str(2 * (15 + AFTER_TRAINING_INTERVALS)), "min")


def test_time_left_stops_at_the_example_limit():
    schedule = _schedule(10, batch_size=8, validate_every=80, train_examples=400)
    assert schedule.max_validations == 5
    progress, _ = _progress(schedule, members=2)
    progress.validation(0, 2, 1.0, 10.0, 10.0, 2, "val_rouge1")
    # The minimum (capped at 5) and the patience both lie past the limit.
    assert progress.intervals_left(0, 2) == (5 - 2) + 5


def _risk(**options):
    return RiskSchedule.make(RiskOptions(risk_updates=2_000, **options))


def test_the_risk_schedule_is_made_of_its_options():
    schedule = _risk(risk_validate_every=300, risk_patience=2, risk_min_updates=900)
    assert schedule == RiskSchedule(
        validate_every=300, patience=2, min_updates=900, max_updates=2_000
    )
    assert "validation every 300 updates" in schedule.describe()


def test_risk_intervals_end_at_the_limit():
    schedule = _risk(risk_validate_every=300)
    # 2,000 = 6 intervals of 300 and one of 200.
    assert [schedule.interval(u) for u in (0, 300, 1_800, 2_000)] == [300, 300, 200, 0]


def test_the_risk_stage_stops_after_its_patience_not_before_its_minimum():
    schedule = _risk(risk_validate_every=100, risk_patience=3, risk_min_updates=500)
    # Best before any update, three validations without better by 300.
    assert not schedule.stops_early(300, since_best=3)
    assert schedule.stops_early(500, since_best=5)
    assert not schedule.stops_early(600, since_best=2)
    assert not schedule.finished(600, early_stopped=False)
    assert schedule.finished(600, early_stopped=True)
    assert schedule.finished(2_000, early_stopped=False)
    # The defaults: no minimum, the stop at the patience.
    assert _risk().stops_early(1_500, since_best=3)


def test_where_the_risk_stage_resumes():
    # 1,150 updates on passes of 400 batches: pass 2 (from 0), batch 350.
    assert _risk().start(1_150, pass_batches=400) == (2, 350)
    assert _risk().start(0, pass_batches=400) == (0, 0)


def test_the_earliest_end_of_the_risk_stage():
    schedule = _risk(risk_validate_every=500, risk_patience=3)
    # At 500, best at 0 (one since): two more validations, 1,500.
    assert schedule.earliest_end(500, since_best=1) == 1_500
    # At 1,500, best at 1,500: three more would pass the limit.
    assert schedule.earliest_end(1_500, since_best=0) == 2_000
    minimum = _risk(risk_validate_every=100, risk_min_updates=1_000)
    # Its patience is spent at 300, but it runs to its minimum.
    assert minimum.earliest_end(300, since_best=3) == 1_000
    # With a minimum not on a validation: the first validation after it.
    assert (
        _risk(risk_validate_every=300, risk_min_updates=1_000).earliest_end(
            300, since_best=5
        )
        == 1_200
    )


def test_the_earliest_end_of_training_asks_the_patience_and_the_limits():
    schedule = _schedule(410)  # at least 10 validations, patience 5, at most 763
    assert schedule.earliest_end(4, since_best=0) == 10
    assert schedule.earliest_end(12, since_best=1) == 16
    assert schedule.earliest_end(760, since_best=0) == 763
    assert schedule.earliest_end(30, since_best=9) == 30  # it stops here


def _risk_progress(schedule, members):
    progress, stream = _progress(_schedule(410), members=members)
    progress.minimum_risk(schedule, members)
    return progress, stream


def _first_risk_validation(progress, updates, seconds, best_updates, since_best):
    """Member 1's first validation of the stage, at ROUGE-1 30 from 31."""
    progress.risk_validation(
        0,
        updates=updates,
        interval_updates=updates,
        seconds=seconds,
        score=30.0,
        before=31.0,
        best_updates=best_updates,
        since_best=since_best,
    )


def test_time_left_in_the_risk_stage_asks_its_schedule():
    schedule = _risk(risk_validate_every=500, risk_patience=3)
    progress, stream = _risk_progress(schedule, members=2)
    # Member 1 at 500, best before any update: it can end at 1,500; member
    # 2 is taken to need as many (more than 0 + 3 * 500).
    assert progress.risk_updates_left(0, 500, since_best=1) == 1_000 + 1_500
    # 500 updates in 10 s: 0.02 s an update. No training interval was timed
    # by this command, so the stages after training are not counted.
    _first_risk_validation(progress, 500, 10.0, best_updates=0, since_best=1)
    line = stream.getvalue().splitlines()[-1]
    assert "minimum risk, update 500/2000: validation ROUGE-1 30.00 (before: " in line
    assert "31.00, best at update 0)" in line
    assert _left(stream) == ("50", "s")
    # Member 1 ended at 1,500; member 2, at 1,000 with its best at 1,000,
    # can end at 2,000 at the earliest, later than the 1,500 member 1 took.
    progress.risk_done(0, 1_500)
    assert progress.risk_updates_left(1, 1_000, since_best=0) == 1_000


def test_time_left_in_the_risk_stage_counts_the_stages_after_training():
    schedule = _risk(risk_validate_every=100, risk_patience=2)
    progress, stream = _risk_progress(schedule, members=1)
    # This command trained a member: a minute an interval.
    progress.validation(0, 1, 60.0, 20.0, 20.0, 1, "val_rouge1")
    # 100 updates in 100 s; at 100, best at 100: 200 more at least, and the
    # stages after training, a minute an interval.
    _first_risk_validation(progress, 100, 100.0, best_updates=100, since_best=0)
    expected = (200 * 1.0 + 60.0 * AFTER_TRAINING_INTERVALS) / 60
    assert _left(stream) == (f"{expected:.0f}", "min")
