"""Training: a run folder, the model, the fit loop with resumable checkpoints.

A run lives in one folder (`runs/<name>/`): its config, vocabulary,
schedule, backup checkpoint, best weights and TensorBoard logs. Running the
same command again after an interruption (Ctrl-C, kill -9) resumes from the
last backup: the same vocabulary and schedule, the weights, the optimizer
and its step counter. The data comes from `models.data`, the schedule from
`models.training.schedule`, the callbacks from `models.training.callbacks`.

Keras and numpy at import: the fit loop and its callbacks serve a training
process without TensorFlow too (`models.training.array_training`); what
reads the `tf.data` pipeline imports TensorFlow when called.
"""

import contextlib
import dataclasses
import typing
from pathlib import Path

import keras
import numpy as np

from models import data
from models.model.members import MemberEnd, write_end
from models.model.run_folder import (
    load_config_and_vocabulary,
    load_run,
    make_features,
    save_vocabulary,
)
from models.model.summarizer import HeadlineSummarizer
from models.settings.errors import UserError
from models.settings.folder_layout import (
    BACKUP_DIR,
    BEST_WEIGHTS_FILE,
    CONFIG_FILE,
    LOGS_DIR,
    MODEL_FILE,
    TRAIN_OPTIONS_FILE,
    VOCABULARY_FILE,
)
from models.settings.json_files import whole_file, write_json
from models.settings.model import SummarizerConfig
from models.training.callbacks import (
    AveragedWeights,
    Backup,
    InterruptBetweenSteps,
    IntervalSeeds,
    ScheduledStopping,
    ValidationReport,
    ValidationRouge,
    backed_up_state,
    uses_ema,
)
from models.training.schedule import Schedule, check_run_folder

if typing.TYPE_CHECKING:  # annotations only: TensorFlow is not imported
    import tensorflow as tf

    from models.text.features import TextFeatures


@dataclasses.dataclass
class FitEnd:
    """How a member's training ended.

    Attributes:
        validations: Validations done in all, those of earlier (resumed)
            commands included.
        early_stopped: Whether early stopping ended it.
        finished: Whether it is done (`Schedule.finished`): stopped early,
            or at its example limit.
        best: The best validation score (`monitor`), None before the first.
        best_validation: Its validation, counted from 1.
        monitor: `"val_rouge1"` or `"val_loss"`.
        history: This command's logs, Keras' `History.history`
            (`{metric: [value per validation]}`).
    """

    validations: int
    early_stopped: bool
    finished: bool
    best: float | None
    best_validation: int | None
    monitor: str
    history: dict = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass(frozen=True)
class RunData:
    """The run folder, and what every member of the run trains with."""

    run_dir: Path
    chief: bool  # the one worker (of several) that keeps and exports
    config: SummarizerConfig
    features: "TextFeatures"
    examples: "tf.data.Dataset"  # the training split's examples, cached
    validation_batches: "tf.data.Dataset"
    # Validation (document, summary) pairs for ROUGE at each validation.
    sample: tuple[tuple[bytes, bytes], ...]
    schedule: Schedule


def prepare_run(run_dir, train_split, config, options, init_from=None):
    """Config and text features of a run: loaded when resuming, else built.

    `init_from`: a trained run folder; a new run takes its config and
    vocabulary (its weights must fit them) instead of `config` and a
    vocabulary built from `train_split`.
    """
    run_dir = Path(run_dir)
    check_run_folder(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path, vocab_path = run_dir / CONFIG_FILE, run_dir / VOCABULARY_FILE
    if config_path.exists() and vocab_path.exists():
        return (*load_run(run_dir), True)
    if init_from is not None:
        config, vocabulary = load_config_and_vocabulary(init_from)
    else:
        vocabulary = data.split_vocabulary(
            train_split,
            config.vocab_size,
            min_count=options.min_count,
            normalization=config.normalization,
        )
        config.vocab_size = len(vocabulary)
    features = make_features(vocabulary, config)
    save_vocabulary(vocabulary, vocab_path)
    config.save(config_path)
    write_json(run_dir / TRAIN_OPTIONS_FILE, dataclasses.asdict(options))
    return config, features, False


def build_model(config, options, strategy=None):
    """A compiled `HeadlineSummarizer` (built on a dummy batch)."""
    scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
    with scope:
        model = HeadlineSummarizer(config)
        dummy = {
            name: np.ones([1, 2], np.int32)
            for name in ("source_ids", "source_ext_ids", "target_in")
        }
        model(dummy)
        average = (
            {"use_ema": True, "ema_momentum": options.ema_momentum}
            if options.ema_momentum
            else {}
        )
        model.compile(
            optimizer=keras.optimizers.Adam(
                options.learning_rate, clipnorm=options.clipnorm, **average
            ),
            jit_compile=options.jit_compile,
        )
        # Its slots too, under the strategy's scope: then `fit` has nothing
        # to build (see `HeadlineSummarizer._maybe_symbolic_build`).
        model.optimizer.build(model.trainable_variables)
    return model


def fit(
    model,
    train_batches,
    validation_batches,
    run_dir,
    options,
    callbacks=(),
    *,
    schedule,
    cap=None,
    on_validation=None,
):
    """Trains with backups (resume), best-model checkpoint, early stopping
    and, if `options.lr_decay` < 1, a learning rate that falls at plateaus,
    validating as `schedule` (`models.training.schedule.Schedule`) says.

    `train_batches` is the training stream from where the run's backup left
    it (`models.data.stream_batches` at `schedule.start(validations)`).
    `cap`: a `TrainingCap` shared by the command's members.
    `on_validation`: called at each validation as
    `callbacks.ValidationReport` says. Returns a `FitEnd`; a member the
    backup shows finished trains no further.

    The best model and early stopping follow validation ROUGE-1 when a
    `ValidationRouge` callback computes it (the metric the model is for),
    else the validation loss. When the optimizer keeps a moving average of
    the weights (`use_ema`, from `options.ema_momentum` in `build_model`),
    all three see it (`AveragedWeights`).
    """
    run_dir = Path(run_dir)
    best_path = run_dir / BEST_WEIGHTS_FILE
    all_callbacks, checkpoint, stopping = _fit_callbacks(
        model, run_dir, options, callbacks, schedule, cap, on_validation
    )
    done, stopped = backed_up_state(run_dir)
    interrupt = InterruptBetweenSteps()
    with interrupt.deferring():
        history = model.fit(
            train_batches,
            validation_data=validation_batches,
            # A finished member's fit restores its state and trains nothing.
            epochs=done
            if schedule.finished(done, stopped)
            else schedule.max_validations,
            steps_per_epoch=schedule.interval_batches,
            callbacks=[
                IntervalCheck(done),
                IntervalSeeds(options.seed),
                *all_callbacks,
                interrupt,
            ],
            shuffle=False,  # the dataset shuffles itself
            verbose=1,
        )
    if best_path.exists():
        model.load_weights(str(best_path))
    return _fit_end(run_dir, schedule, checkpoint, stopping, history.history)


def _fit_callbacks(model, run_dir, options, callbacks, schedule, cap, on_validation):
    """`fit`'s callbacks, in order, with its checkpoint and its stopping.

    Returns `(all_callbacks, checkpoint, stopping)`: the `ModelCheckpoint`
    of the best weights and the `ScheduledStopping`, whose state `fit`
    reads when it ends.
    """
    best_path = run_dir / BEST_WEIGHTS_FILE
    by_rouge = any(isinstance(c, ValidationRouge) for c in callbacks)
    monitor, mode = ("val_rouge1", "max") if by_rouge else ("val_loss", "min")
    checkpoint = keras.callbacks.ModelCheckpoint(
        str(best_path),
        monitor=monitor,
        mode=mode,
        save_best_only=True,
        save_weights_only=True,
    )
    stopping = ScheduledStopping(schedule, monitor=monitor, mode=mode)
    # The learning rate is an optimizer variable: backups keep it.
    decay = (
        [
            keras.callbacks.ReduceLROnPlateau(
                monitor=monitor,
                mode=mode,
                factor=options.lr_decay,
                patience=options.lr_decay_patience,
                verbose=1,
            )
        ]
        if options.lr_decay < 1
        else []
    )
    averaged = [AveragedWeights()] if uses_ema(model.optimizer) else []
    all_callbacks = [
        *averaged,
        # First, so that the metrics they add to the logs are seen below.
        *callbacks,
        checkpoint,
        stopping,
        *decay,
        *[a.restorer() for a in averaged],
        Backup(
            str(run_dir / BACKUP_DIR),
            save_freq=options.checkpoint_every or "epoch",
            tracked=[checkpoint, stopping, *decay],
        ),
    ]
    if keras.backend.backend() == "tensorflow":
        # Keras' TensorBoard callback writes with TensorFlow: another
        # backend's run has no logs. Per validation: with a batch frequency,
        # Keras records only on those batches, and drops the interval's
        # scalars (and ValidationRouge's).
        all_callbacks.append(
            keras.callbacks.TensorBoard(str(run_dir / LOGS_DIR), update_freq="epoch")
        )
    if on_validation is not None:
        all_callbacks.insert(
            all_callbacks.index(stopping) + 1, ValidationReport(on_validation, stopping)
        )
    if cap is not None:
        # Before the backup: the validation at which it stops is backed up.
        all_callbacks.insert(all_callbacks.index(checkpoint), cap)
    return all_callbacks, checkpoint, stopping


def _fit_end(run_dir, schedule, checkpoint, stopping, history):
    """The `FitEnd` of a finished `model.fit`, from its callbacks' state."""
    best = checkpoint.best
    known = best is not None and abs(best) != float("inf")
    validations, _ = backed_up_state(run_dir)
    early_stopped = bool(stopping.stopped_epoch)
    return FitEnd(
        validations=validations,
        early_stopped=early_stopped,
        finished=schedule.finished(validations, early_stopped),
        best=float(best) if known else None,
        best_validation=int(stopping.best_epoch) + 1 if known else None,
        monitor=checkpoint.monitor,
        history=history,
    )


def train_member(
    folder,
    run,
    options,
    strategy=None,
    *,
    start_from=None,
    cap=None,
    on_validation=None,
):
    """Trains one model (an ensemble's member) in `folder`, resuming.

    Args:
        folder: the member's folder.
        run: the `RunData` every member trains with.
        options: the member's `TrainOptions` (its seed).
        strategy: the `tf.distribute` strategy (None: the default).
        start_from: a `model.keras` whose weights it starts from (None: new
            ones).
        cap, on_validation: as `fit` takes them.

    Returns:
        `(model, FitEnd)`.
    """
    folder.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(options.seed)
    validations, _ = backed_up_state(folder)
    train_batches = data.stream_batches(
        run.examples,
        options.batch_size,
        seed=options.seed,
        max_source_length=run.config.max_source_length,
        start=run.schedule.start(validations),
    )
    callbacks = []
    if run.sample:
        callbacks.append(
            ValidationRouge(
                _greedy_headlines(run.features, [d for d, _ in run.sample]),
                [s.decode("utf-8") for _, s in run.sample],
                log_dir=folder / LOGS_DIR / "rouge",
            )
        )
    model = build_model(run.config, options, strategy)
    if start_from is not None:
        # The weights alone: `load_weights` on a `.keras` file would also
        # restore its optimizer (step count, moments, learning rate). A
        # resumed run's backup replaces them all when `fit` starts.
        source = keras.saving.load_model(start_from, compile=False)
        model.set_weights(source.get_weights())
    end = fit(
        model,
        train_batches,
        run.validation_batches,
        folder,
        options,
        callbacks,
        schedule=run.schedule,
        cap=cap,
        on_validation=on_validation,
    )
    return model, end


def _greedy_headlines(features, documents):
    """`ValidationRouge`'s headlines on TensorFlow: the greedy search of the
    export's graph on `documents`, traced at the first validation."""
    from models.decoding.headline_module import headline_search
    from models.settings.search import SearchOptions

    searches = {}

    def headlines(model):
        if model not in searches:
            searches[model] = headline_search(model, features, SearchOptions(), 1)
        return searches[model](documents)

    return headlines


def finish_member(folder, model, fit_end, schedule, save=True):
    """The `MemberEnd` of a member whose training has finished (`fit_end`,
    a `FitEnd`); with `save`, its `model.keras` and then its record are
    written into `folder` (`models.model.members`)."""
    end = MemberEnd(
        validations=fit_end.validations,
        examples=schedule.examples(fit_end.validations),
        reason="early_stopping" if fit_end.early_stopped else "example_limit",
        best=fit_end.best,
        best_validation=fit_end.best_validation,
        best_examples=(
            schedule.examples(fit_end.best_validation)
            if fit_end.best_validation
            else None
        ),
        monitor=fit_end.monitor,
        backend=keras.backend.backend(),
    )
    if save:
        with whole_file(Path(folder) / MODEL_FILE) as partial:
            model.save(partial)
        write_end(folder, end)
    return end


class IntervalCheck(keras.callbacks.Callback):
    """Fails a fit that Keras starts at another interval than its data.

    The data of a resumed run starts after the validations its backup
    holds. Keras falls back to the previous backup when the latest one is
    torn (a kill while it was written); that fallback is copied into place,
    so the same command, run again, starts both at the same interval.
    """

    def __init__(self, first_interval):
        super().__init__()
        self.first_interval = first_interval
        self.checked = False

    def on_epoch_begin(self, epoch, logs=None):
        if not self.checked and epoch != self.first_interval:
            raise UserError(
                "the backup of this run was torn and Keras fell back to "
                f"validation {epoch}, not {self.first_interval}: run the same "
                "command again to resume from it"
            )
        self.checked = True
