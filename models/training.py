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
import numpy as np
import tensorflow as tf
from rouge_score import rouge_scorer

from models import data, text
from models.config import SearchOptions, SummarizerConfig
from models.export import HeadlineModule, headlines_in_batches
from models.features import RESERVED, TextFeatures
from models.summarizer import HeadlineSummarizer

# ---------------------------------------------------------------- vocabulary


def count_words(dataset, batch_size=1024):
    """Word counts of the documents and summaries of `dataset`."""
    counts = collections.Counter()
    for documents, summaries in dataset.batch(batch_size):
        for column in (documents, summaries):
            for row in text.tokenize(column).to_list():
                counts.update(w.decode("utf-8") for w in row)
    return counts


def build_features(train_dataset, config, min_count=2):
    """Builds the vocabulary from the training split; sets `config.vocab_size`."""
    counts = count_words(train_dataset)
    vocabulary = text.build_vocabulary(
        counts, max_size=config.vocab_size, min_count=min_count, reserved=RESERVED
    )
    config.vocab_size = len(vocabulary)
    return TextFeatures(vocabulary, config.max_source_length, config.max_target_length)


def save_vocabulary(vocabulary, path):
    Path(path).write_text("\n".join(vocabulary) + "\n", encoding="utf-8")


def load_vocabulary(path):
    return Path(path).read_text(encoding="utf-8").rstrip("\n").split("\n")


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
        .map(_trim_padding)
    )


def _trim_padding(inputs, target_out):
    # Rows come out of the batched encoding padded to the longest of 1024.
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
    included) and the epoch; the interrupted epoch starts over.
    """

    def __init__(self, backup_dir, save_freq):
        super().__init__(
            backup_dir,
            save_freq=save_freq,
            delete_checkpoint=False,
            double_checkpoint=True,
        )

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


class ValidationRouge(keras.callbacks.Callback):
    """ROUGE of greedy headlines on a validation sample after each epoch."""

    def __init__(self, features, documents, summaries, log_dir=None):
        super().__init__()
        self.features = features
        self.documents = tf.constant(documents)
        self.summaries = summaries
        self.scorer = rouge_scorer.RougeScorer(
            ["rouge1", "rouge2", "rougeL"], use_stemmer=True
        )
        self._greedy = None
        self.writer = tf.summary.create_file_writer(str(log_dir)) if log_dir else None

    def on_epoch_end(self, epoch, logs=None):
        if self._greedy is None:
            module = HeadlineModule(self.model, self.features, SearchOptions())
            self._greedy = tf.function(lambda d: module.search(d, 1)["headlines"])
        headlines = headlines_in_batches(self._greedy, self.documents)
        pairs = zip(self.summaries, headlines, strict=True)
        scores = [self.scorer.score(r, h) for r, h in pairs]
        for key in ("rouge1", "rouge2", "rougeL"):
            value = 100 * float(np.mean([s[key].fmeasure for s in scores]))
            if logs is not None:
                logs[f"val_{key}"] = value
            if self.writer:
                with self.writer.as_default():
                    tf.summary.scalar(f"val_{key}", value, step=epoch)
        print(
            f"\nvalidation ROUGE-1/2/L on {len(headlines)} examples: "
            + " / ".join(
                f"{logs[f'val_{k}']:.1f}" for k in ("rouge1", "rouge2", "rougeL")
            )
            + f"  e.g. {headlines[0]!r}"
        )


# ---------------------------------------------------------------- the run


def load_run(run_dir):
    """Config and text features of an existing run folder."""
    run_dir = Path(run_dir)
    config = SummarizerConfig.load(run_dir / "config.json")
    vocabulary = load_vocabulary(run_dir / "vocab.txt")
    features = TextFeatures(
        vocabulary, config.max_source_length, config.max_target_length
    )
    return config, features


def load_trained_model(run_dir):
    """A finished run's model (`model.keras`, the best weights), for inference."""
    return keras.saving.load_model(Path(run_dir) / "model.keras", compile=False)


def prepare_run(run_dir, train_split, config, options):
    """Config and text features of a run: loaded when resuming, else built."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path, vocab_path = run_dir / "config.json", run_dir / "vocab.txt"
    if config_path.exists() and vocab_path.exists():
        return (*load_run(run_dir), True)
    features = build_features(train_split, config, min_count=options.min_count)
    save_vocabulary(features.words.numpy().astype(str).tolist(), vocab_path)
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
        model.compile(
            optimizer=keras.optimizers.Adam(
                options.learning_rate, clipnorm=options.clipnorm
            ),
            jit_compile=options.jit_compile,
        )
        # Its slots too, under the strategy's scope: then `fit` has nothing
        # to build (see `HeadlineSummarizer._maybe_symbolic_build`).
        model.optimizer.build(model.trainable_variables)
    return model


def fit(model, train_batches, validation_batches, run_dir, options, callbacks=()):
    """Trains with backups (resume), best-model checkpoint, early stopping.

    The best model and early stopping follow validation ROUGE-1 when a
    `ValidationRouge` callback computes it (the metric the model is for),
    else the validation loss.
    """
    run_dir = Path(run_dir)
    best_path = run_dir / "best.weights.h5"
    by_rouge = any(isinstance(c, ValidationRouge) for c in callbacks)
    monitor, mode = ("val_rouge1", "max") if by_rouge else ("val_loss", "min")
    all_callbacks = [
        # First, so that the metrics they add to the logs are seen below.
        *callbacks,
        Backup(str(run_dir / "backup"), save_freq=options.checkpoint_every),
        keras.callbacks.ModelCheckpoint(
            str(best_path),
            monitor=monitor,
            mode=mode,
            save_best_only=True,
            save_weights_only=True,
        ),
        keras.callbacks.EarlyStopping(
            monitor=monitor, mode=mode, patience=options.patience
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
