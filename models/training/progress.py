"""Where a `train.py` command is: a line per stage, and the time left.

Keras' bar shows the current validation interval; these lines show the
whole command: the data, each member's validations with its best validation
score, tuning, export and evaluation, each with the time spent and an
estimate of what is left of the command. The estimate covers the whole
schedule (`models.training.schedule.Schedule`): the current member until the
earliest validation at which early stopping could end it, the members still
to train as many validations as the finished ones took (or, before any has
finished, as many as the current one at least, and the minimum plus the
patience), and the stages after training; every interval takes as long as
the ones measured so far.
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
        schedule = self.schedule
        current = self._member[k].validations
        # The earliest this member can stop: its patience after its best,
        # and not before the schedule's minimum.
        earliest = max(
            current,
            (best_validation or 0) + schedule.patience,
            schedule.min_validations,
        )
        if self._finished:
            typical = round(sum(self._finished) / len(self._finished))
        else:
            typical = max(earliest, schedule.min_validations + schedule.patience)
        left = min(max(earliest, typical), schedule.max_validations) - current
        later = min(typical, schedule.max_validations)
        return left + (self.members - k - 1) * later

    def _eta(self, k, best_validation):
        per_interval = self._interval_seconds()
        elapsed = time.monotonic() - self.start
        if per_interval is None:
            return f"{_minutes(elapsed)} elapsed"
        intervals = self.intervals_left(k, best_validation) + AFTER_TRAINING_INTERVALS
        return (
            f"{_minutes(elapsed)} elapsed, about {_minutes(per_interval * intervals)} "
            "left"
        )

    def _print(self, line):
        print(f"[train.py] {line}", file=self.stream, flush=True)


def machine():
    """The machine a run ran on (`models.settings.machine`), with the
    versions of TensorFlow and Keras."""
    return machine_record(libraries=("tensorflow", "keras"))
