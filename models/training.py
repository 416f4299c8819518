"""Training: a run folder, the model, the fit loop with resumable checkpoints.

A run lives in one folder (`runs/<name>/`): its config, vocabulary, backup
checkpoint, best weights and TensorBoard logs. Running the same command
again after an interruption (Ctrl-C, kill -9) resumes from the last backup:
the same vocabulary, the weights, the optimizer and its step counter. The
data comes from `models.data`, the callbacks from `models.callbacks`.
"""

import contextlib
import dataclasses
import json
from pathlib import Path

import keras
import tensorflow as tf

from models import data
from models.callbacks import (
    AveragedWeights,
    Backup,
    EpochReport,
    EpochSeeds,
    InterruptBetweenSteps,
    ValidationRouge,
    uses_ema,
)
from models.errors import UserError
from models.folder_layout import (
    BACKUP_DIR,
    BEST_WEIGHTS_FILE,
    CONFIG_FILE,
    LOGS_DIR,
    TRAIN_OPTIONS_FILE,
    VOCABULARY_FILE,
    backup_metadata_path,
)
from models.run_folder import (
    load_config_and_vocabulary,
    load_run,
    make_features,
    save_vocabulary,
)
from models.summarizer import HeadlineSummarizer


@dataclasses.dataclass
class FitEnd:
    """How a member's training ended.

    Attributes:
        epochs: Epochs trained in all, those of earlier (resumed) commands
            included.
        early_stopped: Whether early stopping ended it.
        capped: Whether a `TrainingCap` stopped it.
        best: The best validation score (`monitor`), None before an epoch.
        best_epoch: Its epoch, counted from 1.
        monitor: `"val_rouge1"` or `"val_loss"`.
        history: This command's logs, Keras' `History.history`
            (`{metric: [value per epoch]}`).
    """

    epochs: int
    early_stopped: bool
    capped: bool
    best: float | None
    best_epoch: int | None
    monitor: str
    history: dict = dataclasses.field(default_factory=dict, repr=False)

    def finished(self, max_epochs):
        """Whether the member is done: stopped early, or at `max_epochs`."""
        return self.early_stopped or self.epochs >= max_epochs


def backed_up_epoch(run_dir):
    """The epoch a rerun in `run_dir` resumes at (0: none backed up)."""
    path = backup_metadata_path(run_dir)
    try:
        return int(json.loads(path.read_text())["epoch"])
    except (OSError, ValueError, KeyError):
        return 0


def prepare_run(run_dir, train_split, config, options, init_from=None):
    """Config and text features of a run: loaded when resuming, else built.

    `init_from`: a trained run folder; a new run takes its config and
    vocabulary (its weights must fit them) instead of `config` and a
    vocabulary built from `train_split`.
    """
    run_dir = Path(run_dir)
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
    (run_dir / TRAIN_OPTIONS_FILE).write_text(
        json.dumps(dataclasses.asdict(options), indent=2) + "\n"
    )
    return config, features, False


def build_model(config, options, strategy=None):
    """A compiled `HeadlineSummarizer` (built on a dummy batch)."""
    scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
    with scope:
        model = HeadlineSummarizer(config)
        dummy = {
            "source_ids": tf.ones([1, 2], tf.int32),
            "source_ext_ids": tf.ones([1, 2], tf.int32),
            "target_in": tf.ones([1, 2], tf.int32),
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
    cap=None,
    steps_per_epoch=None,
    on_epoch=None,
):
    """Trains with backups (resume), best-model checkpoint, early stopping
    and, if `options.lr_decay` < 1, a learning rate that falls at plateaus.

    `train_batches` starts at the epoch the run's backup holds
    (`backed_up_epoch`), as `models.data.epoch_batches` makes them;
    `steps_per_epoch` is its steps an epoch (None: `options`'). `cap`: a
    `TrainingCap` shared by the command's members. `on_epoch`: called at
    each epoch's end as `callbacks.EpochReport` says. Returns a `FitEnd`.

    The best model and early stopping follow validation ROUGE-1 when a
    `ValidationRouge` callback computes it (the metric the model is for),
    else the validation loss. When the optimizer keeps a moving average of
    the weights (`use_ema`, from `options.ema_momentum` in `build_model`),
    all three see it (`AveragedWeights`).
    """
    run_dir = Path(run_dir)
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
    stopping = keras.callbacks.EarlyStopping(
        monitor=monitor, mode=mode, patience=options.patience
    )
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
        # Per epoch: with a batch frequency, Keras records only on those
        # batches, and drops the epoch's scalars (and ValidationRouge's) too.
        keras.callbacks.TensorBoard(str(run_dir / LOGS_DIR), update_freq="epoch"),
    ]
    if on_epoch is not None:
        all_callbacks.insert(
            all_callbacks.index(stopping) + 1, EpochReport(on_epoch, stopping)
        )
    if cap is not None:
        # Before the backup: the epoch at which it stops is backed up.
        all_callbacks.insert(all_callbacks.index(checkpoint), cap)
    first_epoch = backed_up_epoch(run_dir)
    interrupt = InterruptBetweenSteps()
    with interrupt.deferring():
        history = model.fit(
            train_batches,
            validation_data=validation_batches,
            epochs=options.epochs,
            steps_per_epoch=steps_per_epoch or options.steps_per_epoch,
            callbacks=[
                EpochCheck(first_epoch),
                EpochSeeds(options.seed),
                *all_callbacks,
                interrupt,
            ],
            shuffle=False,  # the dataset shuffles itself
            verbose=1,
        )
    if best_path.exists():
        model.load_weights(str(best_path))
    return _fit_end(run_dir, checkpoint, stopping, cap, history.history)


def _fit_end(run_dir, checkpoint, stopping, cap, history):
    """The `FitEnd` of a finished `model.fit`, from its callbacks' state."""
    best = checkpoint.best
    known = best is not None and abs(best) != float("inf")
    return FitEnd(
        epochs=backed_up_epoch(run_dir),
        early_stopped=stopping.wait >= stopping.patience > 0
        or bool(stopping.stopped_epoch),
        capped=bool(cap is not None and cap.stopped),
        best=float(best) if known else None,
        best_epoch=int(stopping.best_epoch) + 1 if known else None,
        monitor=checkpoint.monitor,
        history=history,
    )


class EpochCheck(keras.callbacks.Callback):
    """Fails a fit that Keras starts at another epoch than its data.

    The data of a resumed run starts at the epoch its backup holds. Keras
    falls back to the previous backup when the latest one is torn (a kill
    while it was written); that fallback is copied into place, so the same
    command, run again, starts both at the same epoch.
    """

    def __init__(self, first_epoch):
        super().__init__()
        self.first_epoch = first_epoch
        self.checked = False

    def on_epoch_begin(self, epoch, logs=None):
        if not self.checked and epoch != self.first_epoch:
            raise UserError(
                f"the backup of this run was torn and Keras fell back to epoch "
                f"{epoch}, not {self.first_epoch}: run the same command again "
                "to resume from it"
            )
        self.checked = True
