"""The recipe's schedule, counted in training examples: when a member
validates, when early stopping may end it, and when it has finished.

The training data is read as a *stream*: passes over the training split,
one after another, pass `p` shuffled by `(seed, p)` (`models.data`). A
*validation interval* is `interval_batches` consecutive batches of the
stream, about `validate_every` examples; a member validates at the end of
each. Small data repeats its pass until an interval is full (the interval
is a whole number of passes); large data validates inside a pass (an
interval is an equal share of a pass). Early stopping counts validations
without a better score (`patience`) and cannot end a member before it has
trained `min_train_examples`; a member trains `train_examples` at most.
OpenNMT-tf's trainer counts the same way, in steps.

A member has finished when early stopping ended it or it reached its
example limit. The schedule is fixed when a run starts: it is written to the
run folder (`schedule.json`), and a later command on the folder reads it and
refuses other settings. In Keras' terms, an interval is an "epoch"
(`steps_per_epoch = interval_batches`) and Keras' epoch index is the
number of validations done.

The minimum-risk stage after training has its schedule here too
(`RiskSchedule`), counted in updates: the same notions (an interval, a
patience, a minimum, a limit, where a resumed stage goes on), set by
`RiskOptions`.

Plain Python: no TensorFlow import.
"""

import dataclasses
import json
import math
from pathlib import Path

from models.settings.errors import UserError
from models.settings.folder_layout import SCHEDULE_FILE, TRAIN_OPTIONS_FILE
from models.settings.json_files import read_json, write_json

# The settings a run folder's schedule is made from, as `TrainOptions` names
# them; a later command must give the same.
SETTINGS = (
    "batch_size",
    "validate_every",
    "patience",
    "min_train_examples",
    "train_examples",
)


def interval_batches(pass_batches, batch_size, validate_every):
    """Batches between two validations.

    With `nominal = validate_every / batch_size` batches, rounded (at least
    one): if a pass has `pass_batches <= nominal`, the interval is the whole
    number of passes nearest to `nominal`; else it is `pass_batches` split
    into the whole number of equal shares nearest to `pass_batches / nominal`
    (one share: the whole pass), rounded to a whole batch. Halves round up.

    Args:
        pass_batches: batches in one pass over the training split.
        batch_size: examples per batch.
        validate_every: examples between validations, nominally.

    Returns:
        The interval in batches, an int >= 1.

    Example:

    >>> interval_batches(408, 64, 25_000)  # the Gigaword sample: one pass
    408
    >>> interval_batches(48, 64, 25_000)  # 2,900 pairs: eight passes
    384
    """
    for name, value in (("pass_batches", pass_batches), ("batch_size", batch_size)):
        if value < 1:
            raise UserError(f"`{name}` must be >= 1. Received: {name}={value}")
    nominal = max(1, _round(validate_every / batch_size))
    if pass_batches <= nominal:
        return pass_batches * _round(nominal / pass_batches)
    return _round(pass_batches / _round(pass_batches / nominal))


def _round(x):
    # Halves up, not to even: a rule to work out by hand.
    return math.floor(x + 0.5)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A run's schedule: its settings, and what follows from its data.

    Attributes:
        batch_size: Examples per batch.
        pass_batches: Batches in one pass over the training split.
        validate_every: Examples between validations, nominally.
        patience: Validations without a better score before early stopping.
        min_train_examples: Early stopping cannot end a member before it
            has trained this many examples.
        train_examples: Most examples a member trains.
        interval_batches: Batches between two validations
            (`interval_batches(...)`).
    """

    batch_size: int
    pass_batches: int
    validate_every: int
    patience: int
    min_train_examples: int
    train_examples: int
    interval_batches: int

    @classmethod
    def make(cls, options, pass_batches):
        """The schedule of `options` (`TrainOptions`) on data of `pass_batches`."""
        return cls(
            **{name: getattr(options, name) for name in SETTINGS},
            pass_batches=pass_batches,
            interval_batches=interval_batches(
                pass_batches, options.batch_size, options.validate_every
            ),
        )

    @property
    def interval_examples(self):
        """Examples between two validations (in full batches)."""
        return self.interval_batches * self.batch_size

    @property
    def min_validations(self):
        """Validations before early stopping may end a member (at most
        `max_validations`)."""
        least = math.ceil(self.min_train_examples / self.interval_examples)
        return min(least, self.max_validations)

    @property
    def max_validations(self):
        """Validations at which a member reaches its example limit."""
        return max(1, math.ceil(self.train_examples / self.interval_examples))

    def examples(self, validations):
        """Examples trained after `validations` validations (in full batches)."""
        return validations * self.interval_examples

    def start(self, validations):
        """`(pass, batch)` of the stream where training after `validations`
        validations goes on: pass `pass` (from 0), after its first `batch`."""
        return divmod(validations * self.interval_batches, self.pass_batches)

    def may_stop(self, validations):
        """Whether early stopping may end a member after `validations`."""
        return validations >= self.min_validations

    def finished(self, validations, early_stopped):
        """Whether a member is done: stopped early, or at its example limit."""
        return early_stopped or validations >= self.max_validations

    def earliest_end(self, validations, since_best):
        """The fewest validations after which a member now at `validations`,
        its best `since_best` validations ago, can have finished: `patience`
        after its best, not before `min_validations`, at most
        `max_validations`.

        Example:

        >>> schedule = Schedule(64, 410, 25_000, 5, 250_000, 20_000_000, 410)
        >>> schedule.earliest_end(4, 0), schedule.earliest_end(20, 2)
        (10, 23)
        """
        least = max(
            validations + max(self.patience - since_best, 0), self.min_validations
        )
        return max(validations, min(least, self.max_validations))

    def describe(self):
        """One line: the interval, the patience and the limits, in examples."""
        passes = self.interval_batches / self.pass_batches
        if self.interval_batches == self.pass_batches:
            share = "one pass"
        elif passes > 1.5:
            share = f"{passes:.0f} passes"
        else:
            share = f"{passes:.2g} of a pass"
        return (
            f"validation every {self.interval_batches} batches "
            f"({self.interval_examples:,} examples, {share} of "
            f"{self.pass_batches} batches); early stopping after "
            f"{self.patience} validations without a better score, not before "
            f"validation {max(1, self.min_validations)} "
            f"({self.examples(max(1, self.min_validations)):,} examples); at most "
            f"{self.max_validations} validations "
            f"({self.examples(self.max_validations):,} examples)"
        )

    def to_dict(self):
        return {
            **dataclasses.asdict(self),
            "interval_examples": self.interval_examples,
            "min_validations": self.min_validations,
            "max_validations": self.max_validations,
        }

    def save(self, run_dir):
        write_json(Path(run_dir) / SCHEDULE_FILE, self.to_dict())

    @classmethod
    def load(cls, run_dir):
        """The schedule recorded in `run_dir`, or None if it has none."""
        values = read_json(Path(run_dir) / SCHEDULE_FILE)
        if values is None:
            return None
        return cls(**{f.name: values[f.name] for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class RiskSchedule:
    """The minimum-risk stage's schedule, counted in updates (batches).

    The stage validates before its first update and every `validate_every`
    updates after it (the last interval ends at `max_updates`), counts the
    validations without a better score from the first on, and stops
    `patience` of them after its best, not before `min_updates`; it runs
    `max_updates` at most. It reads the training pairs pass after pass, so
    that a stage resumed after `u` updates goes on where one never cut
    would be. Unlike the likelihood schedule it is not recorded: the
    stage's state holds its updates, and a later command's options go on
    from there.

    Attributes:
        validate_every: Updates between validations.
        patience: Validations without a better score before the stage stops.
        min_updates: The stage cannot stop early before this many updates.
        max_updates: Most updates the stage runs.
    """

    validate_every: int
    patience: int
    min_updates: int
    max_updates: int

    @classmethod
    def make(cls, options):
        """The schedule of `options` (`RiskOptions`)."""
        return cls(
            validate_every=options.risk_validate_every,
            patience=options.risk_patience,
            min_updates=options.risk_min_updates,
            max_updates=options.risk_updates,
        )

    def interval(self, updates):
        """Updates between the validation after `updates` and the next:
        `validate_every`, fewer where `max_updates` comes first."""
        return max(0, min(self.validate_every, self.max_updates - updates))

    def may_stop(self, updates):
        """Whether early stopping may end the stage after `updates`."""
        return updates >= self.min_updates

    def stops_early(self, updates, since_best):
        """Whether early stopping ends the stage at its validation after
        `updates`, its best `since_best` validations ago."""
        return since_best >= self.patience and self.may_stop(updates)

    def finished(self, updates, early_stopped):
        """Whether the stage is done: stopped early, or at its limit."""
        return early_stopped or updates >= self.max_updates

    def start(self, updates, pass_batches):
        """`(pass, batch)` of the stream of passes of `pass_batches` batches
        where the stage goes on after `updates` updates."""
        return divmod(updates, pass_batches)

    def earliest_end(self, updates, since_best):
        """The fewest updates after which the stage, now at `updates`, its
        best `since_best` validations ago, can have ended: `patience`
        validations after its best, not before `min_updates`, at most
        `max_updates`.

        Example:

        >>> schedule = RiskSchedule(500, 3, 0, 5_000)
        >>> schedule.earliest_end(500, 0), schedule.earliest_end(4_500, 1)
        (2000, 5000)
        >>> RiskSchedule(100, 3, 1_000, 2_000).earliest_end(200, 2)
        1000
        """
        waits = max(
            self.patience - since_best,
            math.ceil((self.min_updates - updates) / self.validate_every),
            0,
        )
        return max(
            updates, min(updates + waits * self.validate_every, self.max_updates)
        )

    def describe(self):
        """One line: the interval, the patience and the limits, in updates."""
        return (
            f"validation every {self.validate_every} updates; early stopping "
            f"after {self.patience} validations without a better score, not "
            f"before update {self.min_updates}; at most {self.max_updates} updates"
        )


def run_schedule(run_dir, options, pass_batches):
    """The schedule of the run in `run_dir`: the recorded one when a command
    resumes it, else made from `options` and written there.

    Raises:
        UserError: `options` or the data differ from the recorded schedule's.
    """
    recorded = Schedule.load(run_dir)
    schedule = Schedule.make(options, pass_batches)
    if recorded is None:
        schedule.save(run_dir)
        return schedule
    for name in (*SETTINGS, "pass_batches"):
        given, kept = getattr(schedule, name), getattr(recorded, name)
        if given == kept:
            continue
        what = (
            f"`{name}` must be {kept}"
            if name != "pass_batches"
            else f"The training data must make {kept} batches a pass"
        )
        raise UserError(
            f"{what}, as when the run in {run_dir} started (its {SCHEDULE_FILE}): "
            f"the same command resumes it, or start a new run (--run-dir). "
            f"Received: {name}={given}"
        )
    return recorded


def check_run_folder(run_dir):
    """Refuses a run folder trained before the schedule was counted in
    examples (its `train_options.json` holds `epochs`).

    Raises:
        UserError: the folder is such a run's.
    """
    path = Path(run_dir) / TRAIN_OPTIONS_FILE
    try:
        options = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if "epochs" in options:
        raise UserError(
            f"`run_dir` holds a run trained in epochs, before the schedule was "
            "counted in training examples; it cannot be resumed: start a new "
            f"run (--run-dir). Received: run_dir={str(run_dir)!r}"
        )
