"""The callbacks of a training run: resumable backups, early stopping by the
schedule, opt-in caps, the weights' moving average, validation ROUGE, and
Ctrl-C between two steps.

`models.training.fit.fit` puts them in order; each docstring says where it goes.
Keras' "epoch" is one validation interval of the schedule
(`models.training.schedule`): its epoch index is the number of validations done.

Keras and numpy only, on any backend: a training process without
TensorFlow (`train.py --backend jax`) uses them too. TensorFlow is imported
only where a TensorFlow run needs it (a multi-worker reduction, a summary
writer).
"""

import contextlib
import signal
import threading
import time
from pathlib import Path

import keras
import numpy as np

from models.model.summarizer import in_multi_worker_mode
from models.scoring.metrics import mean_rouge
from models.settings.folder_layout import (
    CALLBACK_STATE_FILE,
    backup_metadata_path,
    callback_state_path,
)
from models.settings.json_files import read_json, write_json

# The key of `Backup`'s callback state file under which each state is kept by
# the validations done when it was saved.
STATE_BY_VALIDATIONS = "by_validations"


class Backup(keras.callbacks.BackupAndRestore):
    """`BackupAndRestore` that saves every `save_freq` steps *and* at each
    validation, keeping the previous backup in case a kill tears the write.

    A resumed run restores the weights, the optimizer (its step counter
    included) and the validations done; an interrupted interval starts
    over. Keras backs up neither the best value of `ModelCheckpoint` nor the
    state of `EarlyStopping` or `ReduceLROnPlateau`: `tracked` callbacks
    have theirs saved beside the weights and restored, so a resumed run
    keeps the best model and its patience. Put `Backup` after them, so that
    their state is saved as updated at a validation and restored after their
    own `on_train_begin`.
    """

    STATE_ATTRIBUTES = ("best", "wait", "best_epoch", "stopped_epoch")

    def __init__(self, backup_dir, save_freq, tracked=()):
        super().__init__(
            backup_dir,
            save_freq=save_freq,
            delete_checkpoint=False,
            double_checkpoint=True,
        )
        self.tracked = list(tracked)
        self._state_path = Path(backup_dir) / CALLBACK_STATE_FILE

    def callback_state(self):
        """`{class name: {attribute: value}}`, one entry per tracked callback."""
        return {
            type(c).__name__: {
                name: (None if getattr(c, name) is None else float(getattr(c, name)))
                for name in self.STATE_ATTRIBUTES
                if hasattr(c, name)
            }
            for c in self.tracked
        }

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        validations = _validations_done(self._training_metadata_path)
        saved = _saved_callback_state(self._state_path, validations)
        # By class, so that a run resumed with or without `--lr-decay` keeps
        # what it can: a callback that was not tracked starts afresh.
        for callback in self.tracked:
            for name, value in saved.get(type(callback).__name__, {}).items():
                is_count = name != "best" and value is not None
                setattr(callback, name, int(value) if is_count else value)

    def on_epoch_begin(self, epoch, logs=None):
        # Keras counts the validations done only at an interval's end: a
        # resumed run's backups within its first interval would record 0.
        super().on_epoch_begin(epoch, logs)
        self._current_epoch = epoch

    def _save_model(self):
        # The callbacks' state first, under the validations it belongs to,
        # and Keras' record of the validations done last, so that a kill
        # anywhere in between restores the state that matches the record
        # (the previous validation's is kept for Keras' previous backup).
        validations = self._current_epoch
        by_validations = _read_json(self._state_path).get(STATE_BY_VALIDATIONS, {})
        kept = {k: v for k, v in by_validations.items() if int(k) == validations - 1}
        kept[str(validations)] = self.callback_state()
        write_json(self._state_path, {STATE_BY_VALIDATIONS: kept}, indent=None)
        super()._save_model()

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)  # saves when `save_freq="epoch"`
        if self.save_freq != "epoch":
            self._save_model()


def _read_json(path):
    # Keras writes its own record of the validations done, not atomically:
    # one torn by a kill reads as none.
    try:
        return read_json(path, default={})
    except (OSError, ValueError):
        return {}


def _validations_done(metadata_path):
    try:
        return int(_read_json(metadata_path)["epoch"])
    except (KeyError, TypeError, ValueError):
        return 0


def _saved_callback_state(state_path, validations):
    """The tracked callbacks' state that `Backup` saved at `validations`
    validations done (`{}`: none), from its file at `state_path`. A file
    written before the state was kept by validations is read as it is."""
    saved = _read_json(state_path)
    if STATE_BY_VALIDATIONS not in saved:
        return saved
    return saved[STATE_BY_VALIDATIONS].get(str(validations), {})


def backed_up_state(member_dir):
    """`(validations, stopped early)` of the backup in `member_dir`: the
    validations done (Keras' epoch, 0: no backup) and whether early stopping
    ended the member (`ScheduledStopping`'s saved state)."""
    validations = _validations_done(backup_metadata_path(member_dir))
    state = _saved_callback_state(callback_state_path(member_dir), validations)
    stopped = state.get(ScheduledStopping.__name__, {}).get("stopped_epoch")
    return validations, bool(stopped)


class ScheduledStopping(keras.callbacks.EarlyStopping):
    """Keras' `EarlyStopping` (patience in validations) that cannot end a
    member before the schedule allows (`Schedule.may_stop`).

    The best score and the validations without a better one are counted
    from the first validation on; only the stop waits. A stop due before
    then falls at the first validation that may stop.
    """

    def __init__(self, schedule, **kwargs):
        super().__init__(patience=schedule.patience, **kwargs)
        self.schedule = schedule

    def on_epoch_end(self, epoch, logs=None):
        stop_before = self.model.stop_training
        super().on_epoch_end(epoch, logs)
        if self.stopped_epoch == epoch and not self.schedule.may_stop(epoch + 1):
            self.stopped_epoch = 0
            self.model.stop_training = stop_before


class TrainingCap(keras.callbacks.Callback):
    """Stops training at a validation once a command's opt-in caps run out.

    The caps count over every member and stage a command trains: one
    `TrainingCap` serves them all, as each member's callback in turn and as
    the minimum-risk stage's count (`validation_done`). A cap is checked at
    validations only, so that what it leaves is a backed-up validation, from
    which the same command resumes exactly; the interval that crosses the
    time limit is finished first.

    Args:
        minutes: training time this command may take (None: no limit).
        validations: validations this command may run (None: no limit).
    """

    def __init__(self, minutes=None, validations=None):
        super().__init__()
        self.deadline = None if minutes is None else time.monotonic() + 60 * minutes
        self.validations_left = validations
        self.stopped = False

    def spent(self):
        """Whether a cap has run out (no interval may start)."""
        out_of_validations = (
            self.validations_left is not None and self.validations_left <= 0
        )
        out_of_time = self.deadline is not None and time.monotonic() >= self.deadline
        return out_of_validations or out_of_time

    def validation_done(self):
        """Counts one validation; returns whether a cap has run out."""
        if self.validations_left is not None:
            self.validations_left -= 1
        return self.spent()

    def on_train_begin(self, logs=None):
        self.stopped = False

    def on_epoch_end(self, epoch, logs=None):
        over = self.validation_done()
        # Only TensorFlow's models have a strategy.
        strategy = getattr(self.model, "distribute_strategy", None)
        if in_multi_worker_mode(strategy):
            # Workers stop at the same validation, or the others would wait
            # for the stopped one: the first to run out stops them all.
            import tensorflow as tf

            over = bool(strategy.reduce("SUM", tf.constant(over, tf.int32), None))
        if over:
            self.model.stop_training = True
            self.stopped = True


class IntervalSeeds(keras.callbacks.Callback):
    """Sets the model's random streams (dropout, sampled words) from
    `(seed, interval)` at each validation interval's start.

    Keras' backups keep the weights and the optimizer but not the states of
    the layers' `SeedGenerator`s; a resumed run would draw other dropout
    masks than a run never cut. Seeded by the interval alone, interval `i`
    draws the same ones either way.
    """

    def __init__(self, seed):
        super().__init__()
        self.seed = int(seed)

    def on_epoch_begin(self, epoch, logs=None):
        states = [v for v in self.model.variables if _is_seed_state(v)]
        for index, state in enumerate(states):
            value = (self.seed * 1_000_003 + epoch * 1_009 + index) % (2**31 - 1)
            state.assign(np.array([value, 0], dtype=state.dtype))


def _is_seed_state(variable):
    return variable.path.rsplit("/", 1)[-1] == "seed_generator_state"


class ValidationReport(keras.callbacks.Callback):
    """Calls `report(validations, seconds, score, best, best_validation,
    monitor)` at each validation (counted from 1), after `stopping`
    (`ScheduledStopping`) has seen it; `seconds`: the interval's."""

    def __init__(self, report, stopping):
        super().__init__()
        self.report = report
        self.stopping = stopping
        self._start = None

    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        best = self.stopping.best
        known = best is not None and abs(best) != float("inf")
        self.report(
            epoch + 1,
            time.monotonic() - self._start,
            float((logs or {}).get(self.stopping.monitor, float("nan"))),
            float(best) if known else None,
            int(self.stopping.best_epoch) + 1 if known else None,
            self.stopping.monitor,
        )


class InterruptBetweenSteps(keras.callbacks.Callback):
    """Takes a Ctrl-C at the next step's end, not wherever it lands.

    Python raises `KeyboardInterrupt` wherever the signal lands, inside
    TensorFlow's or Keras' own Python code too (a summary being written, an
    iterator being made); a Ctrl-C at a validation was once seen to end a
    run with SIGSEGV instead of exit 130. In `deferring()`, the first Ctrl-C
    is only noted; this callback raises
    `KeyboardInterrupt` at the next training step's end or the next
    interval's start (validation's steps are left to Keras' asynchronous dispatch),
    from where it unwinds like any error; and at the block's end if `fit`
    returned first. A second Ctrl-C interrupts at once. Put it last, so that
    a backup due at that step is written first.
    """

    def __init__(self):
        super().__init__()
        self.requested = False

    def raise_if_requested(self, *args, **kwargs):
        if self.requested:
            self.requested = False
            raise KeyboardInterrupt

    on_train_batch_end = on_epoch_begin = raise_if_requested

    @contextlib.contextmanager
    def deferring(self):
        """Notes the first Ctrl-C (SIGINT) in the block instead of raising.

        Only where Python's own handler is installed: an ignored SIGINT (a
        background job) or another handler is left as it is.
        """
        handler = signal.getsignal(signal.SIGINT)
        own = threading.current_thread() is threading.main_thread()
        if not own or handler is not signal.default_int_handler:
            yield
            return

        def note(signum, frame):
            self.requested = True
            signal.signal(signal.SIGINT, handler)

        signal.signal(signal.SIGINT, note)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, handler)
        self.raise_if_requested()


def _inner(optimizer):
    # Under mixed_float16 the optimizer is a `LossScaleOptimizer`.
    return getattr(optimizer, "inner_optimizer", optimizer)


def uses_ema(optimizer):
    """Whether `optimizer` keeps a moving average of the weights (`use_ema`)."""
    return bool(getattr(_inner(optimizer), "use_ema", False))


class AveragedWeights(keras.callbacks.Callback):
    """Validates and keeps the optimizer's moving average of the weights.

    With `use_ema`, Keras' optimizer keeps an exponential moving average of
    the weights, but validation, the best-model checkpoint and early stopping
    would all see the raw weights. Placed first among the callbacks, this one
    puts the average into the model for validation (`on_test_begin`) and the
    callbacks that follow a validation; `restorer()`, placed before the
    backup, puts the raw weights back, so that training and backups go on
    from them.
    """

    def __init__(self):
        super().__init__()
        self._raw = None

    def _averages(self):
        return _inner(self.model.optimizer)._model_variables_moving_average

    def swap_in(self):
        if self._raw is not None:
            return
        variables = self.model.trainable_variables
        self._raw = [keras.ops.convert_to_numpy(v) for v in variables]
        for variable, average in zip(variables, self._averages(), strict=True):
            # A copy: on JAX an assigned variable would share the average's
            # buffer, which a compiled step then donates (deletes) with it.
            variable.assign(keras.ops.convert_to_numpy(average))

    def swap_out(self):
        if self._raw is None:
            return
        for variable, raw in zip(
            self.model.trainable_variables, self._raw, strict=True
        ):
            variable.assign(raw)
        self._raw = None

    def on_test_begin(self, logs=None):
        self.swap_in()

    def on_epoch_end(self, epoch, logs=None):
        self.swap_in()

    def restorer(self):
        """The callback that puts the raw weights back after a validation."""
        return keras.callbacks.LambdaCallback(
            on_epoch_end=lambda epoch, logs: self.swap_out()
        )


class ValidationRouge(keras.callbacks.Callback):
    """ROUGE of greedy headlines on a validation sample at each validation.

    Args:
        headlines: `headlines(model) -> list of str`: the sample's greedy
            headlines, normalized (the data's form), by `model` as it
            stands; the TensorFlow run's decode text
            (`models.decoding.headline_module.headline_search`), the JAX
            run's prepared ids (`models.decoding.id_search`).
        summaries: The sample's references, str.
        log_dir: Where TensorBoard's scalars go (None: nowhere). TensorFlow
            writes them; on another backend they are not written.
    """

    def __init__(self, headlines, summaries, log_dir=None):
        super().__init__()
        self.headlines = headlines
        self.summaries = list(summaries)
        self.writer = None
        if log_dir and keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            self.writer = tf.summary.create_file_writer(str(log_dir))

    def on_epoch_end(self, epoch, logs=None):
        headlines = self.headlines(self.model)
        scores = mean_rouge(headlines, self.summaries, ("rouge1", "rouge2", "rougeL"))
        for key, value in scores.items():
            if logs is not None:
                logs[f"val_{key}"] = value
            if self.writer:
                import tensorflow as tf

                with self.writer.as_default():
                    tf.summary.scalar(f"val_{key}", value, step=epoch)
        print(
            f"\nvalidation ROUGE-1/2/L on {len(headlines)} examples: "
            + " / ".join(f"{value:.1f}" for value in scores.values())
            + f"  e.g. {headlines[0]!r}"
        )
