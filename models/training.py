"""Training: datasets, vocabulary, the fit loop with resumable checkpoints.

A run lives in one folder (`runs/<name>/`): its config, vocabulary, backup
checkpoint, best weights and TensorBoard logs. Running the same command
again after an interruption (Ctrl-C, kill -9) resumes from the last backup:
the same vocabulary, the weights, the optimizer and its step counter.
"""

import collections
import contextlib
import dataclasses
import json
import time
from pathlib import Path

import keras
import tensorflow as tf

from models import data, text
from models.config import SearchOptions
from models.inference import HeadlineModule, headlines_in_batches
from models.metrics import mean_rouge
from models.runs import load_run, make_features, save_vocabulary
from models.summarizer import HeadlineSummarizer

# ---------------------------------------------------------------- vocabulary


def count_words(dataset, batch_size=1024, normalization="gigaword"):
    """Word counts of the documents and summaries of `dataset`."""
    counts = collections.Counter()
    for documents, summaries in dataset.batch(batch_size):
        for column in (documents, summaries):
            tokens = text.tokenize(column, normalization=normalization)
            for row in tokens.to_list():
                counts.update(w.decode("utf-8") for w in row)
    return counts


def build_features(train_dataset, config, min_count=2):
    """Builds the vocabulary from the training split; sets `config.vocab_size`."""
    counts = count_words(train_dataset, normalization=config.normalization)
    vocabulary = text.build_vocabulary(
        counts, max_size=config.vocab_size, min_count=min_count
    )
    config.vocab_size = len(vocabulary)
    return make_features(vocabulary, config)


# ---------------------------------------------------------------- datasets


def encode_dataset(dataset, features):
    """`(document, summary)` strings to `(inputs, target_out)` examples."""

    def encode(documents, summaries):
        source = features.encode_source(documents)
        target = features.encode_target(summaries, source)
        inputs = {
            "source_ids": source["ids"],
            "source_ext_ids": source["ext_ids"],
            "target_in": target["target_in"],
        }
        return inputs, target["target_out"]

    # Encoding a thousand at a time is far cheaper than one by one; the
    # examples are then unbatched and re-batched by length.
    return (
        dataset.batch(1024)
        .map(encode, num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
        .map(_unpad_example)
    )


def _unpad_example(inputs, target_out):
    # Rows come out of the batched encoding padded to the longest of 1024:
    # cut each back to its own length, so that batches pad only to theirs.
    source_length = tf.maximum(
        1, tf.reduce_sum(tf.cast(inputs["source_ids"] != 0, tf.int32))
    )
    target_length = tf.reduce_sum(tf.cast(target_out != 0, tf.int32))
    inputs = {
        "source_ids": inputs["source_ids"][:source_length],
        "source_ext_ids": inputs["source_ext_ids"][:source_length],
        "target_in": inputs["target_in"][:target_length],
    }
    return inputs, target_out[:target_length]


def batched(encoded, batch_size, *, training, seed=0):
    """Length-bucketed, cached, shuffled, prefetched batches."""
    return data.make_batches(
        encoded,
        batch_size=batch_size,
        length_fn=lambda inputs, target: tf.shape(inputs["source_ids"])[0],
        shuffle=training,
        seed=seed,
    )


# ---------------------------------------------------------------- callbacks


class Backup(keras.callbacks.BackupAndRestore):
    """`BackupAndRestore` that saves every `save_freq` steps *and* at each
    epoch's end, keeping the previous backup in case a kill tears the write.

    A resumed run restores the weights, the optimizer (its step counter
    included) and the epoch; the interrupted epoch starts over. Keras backs
    up neither the best value of `ModelCheckpoint` nor the state of
    `EarlyStopping` or `ReduceLROnPlateau`: `tracked` callbacks have theirs
    saved beside the weights and restored, so a resumed run keeps the best
    model and its patience. Put `Backup` after them, so that their state is
    saved as updated at an epoch's end and restored after their own
    `on_train_begin`.
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
        self._state_path = Path(backup_dir) / "callback_state.json"

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
        if not self._state_path.exists():
            return
        saved = json.loads(self._state_path.read_text())
        if isinstance(saved, list):  # written before the learning-rate decay
            saved = dict(zip(("ModelCheckpoint", "EarlyStopping"), saved, strict=True))
        # By class, so that a run resumed with or without `--lr-decay` keeps
        # what it can: a callback that was not tracked starts afresh.
        for callback in self.tracked:
            for name, value in saved.get(type(callback).__name__, {}).items():
                is_count = name != "best" and value is not None
                setattr(callback, name, int(value) if is_count else value)

    def _save_model(self):
        super()._save_model()
        # Written after the weights: a kill in between leaves the previous
        # epoch's state, which loses patience already spent (and can halve
        # a learning rate that the weights' optimizer already halved).
        tmp = self._state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.callback_state()))
        tmp.replace(self._state_path)

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        self._save_model()


class TimeBudget(keras.callbacks.Callback):
    """Stops training once `minutes` have passed (checked every batch)."""

    def __init__(self, minutes):
        super().__init__()
        self.seconds = minutes * 60
        self.start = None
        self.stopped = False

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        over = time.monotonic() - self.start > self.seconds
        strategy = self.model.distribute_strategy
        if strategy.extended._in_multi_worker_mode():
            # Workers stop at the same step, or the others would wait for
            # the stopped one: the first to run out of time stops them all.
            over = bool(strategy.reduce("SUM", tf.constant(over, tf.int32), None))
        if over:
            self.model.stop_training = True
            self.stopped = True


def _inner(optimizer):
    # Under mixed_float16 the optimizer is a `LossScaleOptimizer`.
    return getattr(optimizer, "inner_optimizer", optimizer)


def _uses_ema(optimizer):
    return bool(getattr(_inner(optimizer), "use_ema", False))


class AveragedWeights(keras.callbacks.Callback):
    """Validates and keeps the optimizer's moving average of the weights.

    With `use_ema`, Keras' optimizer keeps an exponential moving average of
    the weights, but validation, the best-model checkpoint and early stopping
    would all see the raw weights. Placed first among the callbacks, this one
    puts the average into the model for validation (`on_test_begin`) and the
    epoch-end callbacks; `restorer()`, placed before the backup, puts the raw
    weights back, so that training and backups go on from them.
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
        self._raw = [tf.identity(v) for v in variables]
        for variable, average in zip(variables, self._averages(), strict=True):
            variable.assign(average)

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
        """The callback that puts the raw weights back at an epoch's end."""
        return keras.callbacks.LambdaCallback(
            on_epoch_end=lambda epoch, logs: self.swap_out()
        )


class ValidationRouge(keras.callbacks.Callback):
    """ROUGE of greedy headlines on a validation sample after each epoch."""

    def __init__(self, features, documents, summaries, log_dir=None):
        super().__init__()
        self.features = features
        self.documents = tf.constant(documents)
        self.summaries = summaries
        self._greedy = None
        self.writer = tf.summary.create_file_writer(str(log_dir)) if log_dir else None

    def on_epoch_end(self, epoch, logs=None):
        if self._greedy is None:
            module = HeadlineModule(self.model, self.features, SearchOptions())
            self._greedy = tf.function(
                lambda d: module.search(d, 1)["normalized_headlines"], autograph=False
            )
        headlines = headlines_in_batches(self._greedy, self.documents)
        scores = mean_rouge(headlines, self.summaries, ("rouge1", "rouge2", "rougeL"))
        for key, value in scores.items():
            if logs is not None:
                logs[f"val_{key}"] = value
            if self.writer:
                with self.writer.as_default():
                    tf.summary.scalar(f"val_{key}", value, step=epoch)
        print(
            f"\nvalidation ROUGE-1/2/L on {len(headlines)} examples: "
            + " / ".join(f"{value:.1f}" for value in scores.values())
            + f"  e.g. {headlines[0]!r}"
        )


# ---------------------------------------------------------------- the run


def prepare_run(run_dir, train_split, config, options):
    """Config and text features of a run: loaded when resuming, else built."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path, vocab_path = run_dir / "config.json", run_dir / "vocab.txt"
    if config_path.exists() and vocab_path.exists():
        return (*load_run(run_dir), True)
    features = build_features(train_split, config, min_count=options.min_count)
    # Decoded as UTF-8: numpy's `astype(str)` reads the bytes as ASCII.
    words = [w.decode("utf-8") for w in features.words.numpy().tolist()]
    save_vocabulary(words, vocab_path)
    config.save(config_path)
    (run_dir / "train_options.json").write_text(
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


def fit(model, train_batches, validation_batches, run_dir, options, callbacks=()):
    """Trains with backups (resume), best-model checkpoint, early stopping
    and, if `options.lr_decay` < 1, a learning rate that falls at plateaus.

    The best model and early stopping follow validation ROUGE-1 when a
    `ValidationRouge` callback computes it (the metric the model is for),
    else the validation loss. When the optimizer keeps a moving average of
    the weights (`use_ema`, from `options.ema_momentum` in `build_model`),
    all three see it (`AveragedWeights`).
    """
    run_dir = Path(run_dir)
    best_path = run_dir / "best.weights.h5"
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
    averaged = [AveragedWeights()] if _uses_ema(model.optimizer) else []
    all_callbacks = [
        *averaged,
        # First, so that the metrics they add to the logs are seen below.
        *callbacks,
        checkpoint,
        stopping,
        *decay,
        *[a.restorer() for a in averaged],
        Backup(
            str(run_dir / "backup"),
            save_freq=options.checkpoint_every,
            tracked=[checkpoint, stopping, *decay],
        ),
        keras.callbacks.TensorBoard(str(run_dir / "logs"), update_freq=50),
    ]
    if options.max_train_minutes:
        all_callbacks.append(TimeBudget(options.max_train_minutes))
    history = model.fit(
        train_batches,
        validation_data=validation_batches,
        epochs=options.epochs,
        steps_per_epoch=options.steps_per_epoch,
        callbacks=all_callbacks,
        shuffle=False,  # the dataset shuffles itself
        verbose=1,
    )
    if best_path.exists():
        model.load_weights(str(best_path))
    return history
