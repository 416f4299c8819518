"""Where a `train.py` command is: a line per stage, and the time left.

Keras' bar shows the current validation interval; these lines show the
whole command: the data, each member's validations with its best validation
score, the minimum-risk stage's validations, tuning, export and evaluation,
each with the time spent and an estimate of what is left of the command.

The estimate asks the stage's schedule (`models.training.schedule`:
`Schedule` for training, `RiskSchedule` for the minimum-risk stage) when a
member can end at the earliest: the current member until then, the members
still to go as long as the ones that ended took (or, before any has ended,
as long as the current one at least, and its minimum plus the patience),
and the stages after training; every interval, or update, takes as long as
the ones this command measured so far. While members train, the
minimum-risk stage is left out (its updates are timed once it runs); the
stages after training are counted in training intervals, where this
command timed one.
"""

import dataclasses
import sys
import time

from models.settings.machine import machine as machine_record

# Tuning, export and evaluation after training, in validation intervals of
# training time: they decode a fixed number of validation and test
# documents with the ensemble, whose cost grows with the model as an
# interval's does, and an interval is about `validate_every` examples on any
# data.
AFTER_TRAINING_INTERVALS = 6


def _minutes(seconds):
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


@dataclasses.dataclass
class _Member:
    validations: int = 0  # done in all, resumed ones included
    seconds: float = 0.0  # this command's time on it
    intervals_here: int = 0  # trained by this command


class CommandProgress:
    """Prints one line per stage and per validation to `stream`, with an ETA.

    Args:
        members: the ensemble's size.
        stream: where the lines go (stderr).
    """

    def __init__(self, members, stream=None):
        self.members = members
        self.schedule = None
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.stage_seconds = {}
        self._stage = None
        self._stage_start = None
        self._member = {}
        self._finished = []
        self.risk_schedule = None
        self.risk_members = 0
        self._risk_ended = []
        self._risk_seconds = 0.0
        self._risk_updates_here = 0

    def stage(self, name, detail=""):
        """Starts stage `name` (ending the previous one) and says so."""
        self._end_stage()
        self._stage, self._stage_start = name, time.monotonic()
        self._print(f"{name}{': ' + detail if detail else ''}")

    def _end_stage(self):
        if self._stage is not None:
            spent = time.monotonic() - self._stage_start
            self.stage_seconds[self._stage] = (
                self.stage_seconds.get(self._stage, 0.0) + spent
            )
        self._stage = None

    def finish(self):
        """Ends the last stage; returns `{stage: seconds}`."""
        self._end_stage()
        return {k: round(v, 1) for k, v in self.stage_seconds.items()}

    def training(self, schedule):
        """Training starts on `schedule` (a `Schedule`); says what it is."""
        self.schedule = schedule
        self._print(f"schedule: {schedule.describe()}")

    def member_done(self, k, validations):
        """Member `k` (from 0) finished after `validations` validations."""
        self._finished.append(validations)
        self._member.setdefault(k, _Member()).validations = validations

    def validation(
        self, k, validations, seconds, score, best, best_validation, monitor
    ):
        """Member `k` ran validation `validations` (from 1), its interval
        trained in `seconds`."""
        member = self._member.setdefault(k, _Member())
        member.validations = validations
        member.seconds += seconds
        member.intervals_here += 1
        name = "ROUGE-1" if monitor == "val_rouge1" else "loss"
        best_text = (
            f", best {best:.2f} at validation {best_validation}"
            if best is not None
            else ""
        )
        examples = self.schedule.examples(validations)
        self._print(
            f"member {k + 1}/{self.members}, validation {validations} "
            f"({examples:,} examples): {name} {score:.2f}{best_text}; "
            f"{self._eta(k, best_validation)}"
        )

    def _interval_seconds(self):
        spent = [m for m in self._member.values() if m.intervals_here]
        if not spent:
            return None
        return sum(m.seconds for m in spent) / sum(m.intervals_here for m in spent)

    def intervals_left(self, k, best_validation):
        """The validation intervals the command has left to train, member
        `k` being at its last reported validation, best at
        `best_validation`."""
        current = self._member[k].validations
        return units_left(
            self.schedule,
            self.schedule.min_validations,
            current,
            current - (best_validation or 0),
            self._finished,
            self.members - k - 1,
        )

    def _eta(self, k, best_validation):
        per_interval = self._interval_seconds()
        if per_interval is None:
            return self._elapsed()
        intervals = self.intervals_left(k, best_validation) + AFTER_TRAINING_INTERVALS
        return self._elapsed(per_interval * intervals)

    def _elapsed(self, left=None):
        elapsed = f"{_minutes(time.monotonic() - self.start)} elapsed"
        return elapsed if left is None else f"{elapsed}, about {_minutes(left)} left"

    def minimum_risk(self, schedule, members):
        """The minimum-risk stage starts on `schedule` (a `RiskSchedule`)
        for `members` members."""
        self.risk_schedule = schedule
        self.risk_members = members

    def risk_done(self, k, updates):
        """Member `k` (from 0, of the stage's) ended the stage at `updates`."""
        self._risk_ended.append(updates)

    def risk_validation(
        self,
        k,
        *,
        updates,
        interval_updates,
        seconds,
        score,
        before,
        best_updates,
        since_best,
    ):
        """The stage's member `k` (from 0) validated after `updates`, its
        last `interval_updates` taking `seconds` (the keywords of
        `risk_fine_tuning.fine_tune`'s `on_validation`)."""
        self._risk_seconds += seconds
        self._risk_updates_here += interval_updates
        per_update = self._risk_seconds / self._risk_updates_here
        left = per_update * self.risk_updates_left(k, updates, since_best)
        per_interval = self._interval_seconds()
        if per_interval is not None:
            left += per_interval * AFTER_TRAINING_INTERVALS
        self._print(
            f"minimum risk, update {updates}/{self.risk_schedule.max_updates}: "
            f"validation ROUGE-1 {score:.2f} (before: {before:.2f}, best at "
            f"update {best_updates}); {self._elapsed(left)}"
        )

    def risk_updates_left(self, k, updates, since_best):
        """The minimum-risk updates the command has left, the stage's member
        `k` being at `updates`, its best `since_best` validations ago."""
        schedule = self.risk_schedule
        return units_left(
            schedule,
            schedule.min_updates,
            updates,
            since_best,
            self._risk_ended,
            self.risk_members - k - 1,
        )

    def _print(self, line):
        print(f"[train.py] {line}", file=self.stream, flush=True)


def units_left(schedule, minimum, done, since_best, ended, later):
    """What `later` members and the current one have left to train, in the
    units of `schedule` (a `Schedule`'s validations, a `RiskSchedule`'s
    updates): the current one, at `done` with its best `since_best` ago, to
    its `schedule.earliest_end`; each later one as many as the `ended`
    members took on average, or, before any has ended, as many as the
    current one at least and as one whose best falls at the `minimum`.

    Example:

    >>> from models.training.schedule import RiskSchedule
    >>> schedule = RiskSchedule(validate_every=500, patience=3, min_updates=0,
    ...                         max_updates=5_000)
    >>> # From 1,000 to 2,000 at the earliest; the next member as long.
    >>> units_left(schedule, 0, 1_000, 1, [], later=1)
    3000
    """
    end = schedule.earliest_end(done, since_best)
    if ended:
        typical = round(sum(ended) / len(ended))
    else:
        typical = max(end, schedule.earliest_end(minimum, 0))
    return max(end, typical) - done + later * typical


def machine():
    """The machine a run ran on (`models.settings.machine`), with the
    versions of TensorFlow and Keras."""
    return machine_record(libraries=("tensorflow", "keras"))
