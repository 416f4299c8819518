"""What `train.py` runs: data, training, export, evaluation, one after another."""

import contextlib
import dataclasses
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import keras
import tensorflow as tf

from models import data, distill, text, tuning
from models.config import (
    SEARCH_TUNING_FILE,
    SearchOptions,
    SummarizerConfig,
    TrainOptions,
)
from models.distribute import in_multi_worker_mode
from models.ensemble import SummarizerEnsemble
from models.errors import LostWorker, UserError, first_line
from models.export import export
from models.flags import given
from models.run_folder import load_trained_model, member_dirs, model_files
from models.training import ValidationRouge, build_model, fit, prepare_run

_COLLECTIVE_TIMEOUT_S = 600

# What collective ops raise when a peer dies or stops answering.
_COLLECTIVE_ERRORS = (
    tf.errors.UnavailableError,
    tf.errors.DeadlineExceededError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
    tf.errors.InternalError,
)


def _configure_devices(args):
    if args.cpu_devices > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * args.cpu_devices
        )
    if args.mixed_precision:
        import keras

        keras.mixed_precision.set_global_policy(args.mixed_precision)
    if args.strategy == "mirrored":
        return tf.distribute.MirroredStrategy()
    if args.strategy == "multi_worker":
        # A killed worker's peers fail at once (its connections close); one
        # that hangs would keep them waiting forever but for a timeout, far
        # longer than the gap between two workers reaching the same step.
        return tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                timeout_seconds=_COLLECTIVE_TIMEOUT_S
            )
        )
    return None


def load_splits(args):
    kwargs = dict(
        data_dir=args.data_dir,
        dataset=args.dataset,
        document_key=args.document_key,
        summary_key=args.summary_key,
    )
    if getattr(args, "tfds_dir", None):
        kwargs["tfds_dir"] = args.tfds_dir
    return {s: data.load_split(s, **kwargs) for s in ("train", "validation")}


def default_normalization(args, train_split, sample=1000):
    """`gigaword` for Gigaword's own text, `general` for any other data."""
    if args.dataset != "gigaword":
        return "general"
    if not args.data_dir:
        return "gigaword"
    pairs = train_split.take(sample).as_numpy_iterator()
    return text.guess_normalization(s.decode("utf-8") for p in pairs for s in p)


def _tune_decoding(args, model, features, validation, search, run_dir):
    """`search` with the validation-best length penalty and n-gram blocking,
    and greedy search's end penalty."""
    pairs = list(validation.take(args.tune_examples).as_numpy_iterator())
    if not pairs:
        return search
    print(
        f"Tuning the length penalty and n-gram blocking on {len(pairs)} "
        "validation examples",
        file=sys.stderr,
    )
    sample = (model, features, [d for d, _ in pairs], [s.decode() for _, s in pairs])
    chosen, rows = tuning.tune_search_options(
        *sample, search, args.tune_length_penalties, args.tune_ngram_sizes
    )
    print(tuning.format_rows(rows, chosen), file=sys.stderr)
    record = {"grid": rows}
    if args.tune_end_penalties:
        print("Tuning greedy search's end penalty", file=sys.stderr)
        chosen, greedy_rows = tuning.tune_greedy_end_penalty(
            *sample, chosen, args.tune_end_penalties
        )
        print(tuning.format_greedy_rows(greedy_rows, chosen), file=sys.stderr)
        record["greedy_grid"] = greedy_rows
    (run_dir / SEARCH_TUNING_FILE).write_text(
        json.dumps({"chosen": dataclasses.asdict(chosen), **record}, indent=2) + "\n"
    )
    return chosen


@dataclasses.dataclass
class _Run:
    """What every member of a run trains with."""

    run_dir: Path
    chief: bool  # the one worker (of several) that keeps and exports
    strategy: object
    config: SummarizerConfig
    features: object
    encoded: object  # the training split's examples
    validation_batches: object
    sample: list  # validation pairs for ROUGE after each epoch
    initial_weights: list  # member k starts from the k-th `model.keras`, if any


def _train_member(run_dir, run, options, member_rank=0):
    """Trains one model (an ensemble's member) in `run_dir`, resuming."""
    run_dir.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(options.seed)
    train_batches = data.batched(
        run.encoded, options.batch_size, training=True, seed=options.seed
    )
    if options.steps_per_epoch is None:
        train_batches = _with_known_length(train_batches)
    else:
        # Epochs shorter than the data: without a repeat, Keras stops the
        # whole fit when the split runs out, however many epochs are left.
        train_batches = train_batches.repeat()
    callbacks = []
    if run.sample:
        callbacks.append(
            ValidationRouge(
                run.features,
                [d for d, _ in run.sample],
                [s.decode("utf-8") for _, s in run.sample],
                log_dir=run_dir / "logs" / "rouge",
            )
        )
    strategy = run.strategy
    model = build_model(run.config, options, strategy)
    if member_rank < len(run.initial_weights):
        # The weights alone: `load_weights` on a `.keras` file would also
        # restore its optimizer (step count, moments, learning rate). A
        # resumed run's backup replaces them all when `fit` starts.
        source = keras.saving.load_model(
            run.initial_weights[member_rank], compile=False
        )
        model.set_weights(source.get_weights())
    try:
        fit(model, train_batches, run.validation_batches, run_dir, options, callbacks)
    except _COLLECTIVE_ERRORS as error:
        if not in_multi_worker_mode(strategy):
            raise
        raise LostWorker(
            "a worker left the cluster, so all stopped "
            f"({type(error).__name__}: {first_line(error)}); "
            "run the same command on every worker to resume from the last backup"
        ) from None
    return model


def _with_known_length(batches):
    """`batches` with its number of batches known to Keras.

    One pass (which fills the encoding cache that the first epoch would fill)
    gives the progress bar a step count and an ETA from the first epoch on,
    and Keras no longer warns that the data "ran out". Bucketing by length
    makes the count the same every epoch, whatever the shuffle.
    """
    count = int(batches.reduce(0, lambda count, _: count + 1))
    return batches.apply(tf.data.experimental.assert_cardinality(count))


def _worker_run_dir(run_dir, cleanup):
    """A non-chief worker's run folder: a scratch copy, removed on exit.

    Every worker writes checkpoints (they save the same weights), but only
    the chief's are kept, as in Keras' `BackupAndRestore` and TensorFlow's
    multi-worker guide. When the chief's run has a backup (a resumed run),
    the copy starts from it, so that every worker restores the same state.
    """
    scratch = Path(cleanup.enter_context(tempfile.TemporaryDirectory()))
    if (run_dir / "backup").exists():
        shutil.copytree(run_dir, scratch / "run", ignore=shutil.ignore_patterns("logs"))
    return scratch / "run"


def run(args):
    """Trains, exports and evaluates as `train.py`'s flags say."""
    with contextlib.ExitStack() as cleanup:
        return _run(args, cleanup)


def _run(args, cleanup):
    options = TrainOptions(**given(args, TrainOptions))
    search = SearchOptions(**given(args, SearchOptions))
    strategy = _configure_devices(args)
    keras.utils.set_random_seed(options.seed)
    # Checked before the data loads: a mistyped folder fails at once.
    initial_weights = _initial_weights(
        getattr(args, "init_from", None), options.ensemble
    )
    splits = load_splits(args)
    run = _prepare(args, splits, options, strategy, cleanup, initial_weights)
    members = _train_members(run, options)
    if not run.chief:
        print(
            "Trained in step with the chief, which exports the model", file=sys.stderr
        )
        return None
    model = members[0] if len(members) == 1 else SummarizerEnsemble(members)
    if args.tune_decoding and args.tune_examples > 0:
        search = _tune_decoding(
            args, model, run.features, splits["validation"], search, run.run_dir
        )
    return _export_and_evaluate(args, run, model, search)


def _prepare(args, splits, options, strategy, cleanup, initial_weights):
    """The run folder, its config and vocabulary, and the encoded data."""
    config = SummarizerConfig(**given(args, SummarizerConfig))
    train_split = splits["train"]
    if args.max_train_examples:
        train_split = train_split.take(args.max_train_examples)
    if getattr(args, "normalization", None) is None:
        config.normalization = default_normalization(args, train_split)
    run_dir = Path(args.run_dir or f"runs/{args.name}")
    chief = strategy is None or strategy.extended.should_checkpoint
    if not chief:
        run_dir = _worker_run_dir(run_dir, cleanup)
    init_from = getattr(args, "init_from", None)
    if getattr(args, "distill_from", None):
        train_split = distill.distilled_split(
            train_split, args.distill_from, run_dir, args.distill_targets
        )
    config, features, resumed = prepare_run(
        run_dir, train_split, config, options, init_from
    )
    print(
        f"{'Resuming' if resumed else 'Starting'} run {run_dir}: vocabulary "
        f"{config.vocab_size} words, attention {config.attention}, copy {config.copy}, "
        f"coverage {config.coverage}"
        + (
            f"; config, vocabulary and weights from {init_from}"
            if init_from and not resumed
            else ""
        ),
        file=sys.stderr,
    )
    if strategy is not None:
        print(
            f"Training with {type(strategy).__name__} on "
            f"{strategy.num_replicas_in_sync} replicas",
            file=sys.stderr,
        )
    validation_batches = _with_known_length(
        data.batched(
            data.encode_dataset(splits["validation"], features),
            options.batch_size,
            training=False,
        )
    )
    sample = list(
        splits["validation"].take(options.validation_rouge_examples).as_numpy_iterator()
    )
    return _Run(
        run_dir=run_dir,
        chief=chief,
        strategy=strategy,
        config=config,
        features=features,
        encoded=data.encode_dataset(train_split, features),
        validation_batches=validation_batches,
        sample=sample,
        initial_weights=initial_weights,
    )


def _initial_weights(init_from, members):
    """The `model.keras` files that `members` members start from, in order."""
    if not init_from:
        return []
    init_from = Path(init_from)
    files = list(model_files(init_from).values())
    needed = [init_from / "config.json", init_from / "vocab.txt", files[0]]
    missing = [p.name for p in needed if not p.is_file()]
    if missing:
        raise UserError(
            "`init_from` must be a trained run folder (runs/<name>, with "
            f"config.json, vocab.txt and model.keras); {', '.join(missing)} "
            f"missing. Received: init_from={str(init_from)!r}"
        )
    if len(files) < members:
        raise UserError(
            f"`init_from` has {len(files)} trained member(s), fewer than the "
            f"run's ensemble. Received: init_from={str(init_from)!r}, "
            f"ensemble={members}"
        )
    return files[:members]


def _train_members(run, options):
    """Trains the ensemble's members in turn (one: the model), resuming."""
    deadline = time.monotonic() + 60 * (options.max_train_minutes or math.inf)
    members = []
    for k, member_dir in enumerate(member_dirs(run.run_dir, options.ensemble)):
        if k and (member_dir / "model.keras").exists():
            members.append(load_trained_model(member_dir))
            continue
        minutes_left = (deadline - time.monotonic()) / 60
        if k and minutes_left <= 0:
            print(f"No time left for ensemble member {k + 1}", file=sys.stderr)
            break
        if options.ensemble > 1:
            print(f"Ensemble member {k + 1} of {options.ensemble}", file=sys.stderr)
        member_options = dataclasses.replace(
            options,
            seed=options.seed + k,
            max_train_minutes=options.max_train_minutes and minutes_left,
        )
        model = _train_member(member_dir, run, member_options, k)
        if run.chief:
            model.save(member_dir / "model.keras")
        members.append(model)
    return members


def _export_and_evaluate(args, run, model, search):
    """Exports `model`; scores the export unless `--skip-eval`."""
    version_dir = export(
        model,
        run.features,
        Path(args.export_dir or f"saved_models/{args.name}"),
        options=search,
        extra_files={
            "config.json": json.dumps(run.config.to_dict(), indent=2),
            **model_files(run.run_dir),
        },
    )
    print(f"Exported {version_dir}", file=sys.stderr)
    if args.skip_eval:
        return version_dir
    from models import evaluate

    evaluate.evaluate(
        version_dir,
        split=args.eval_split,
        data_dir=args.data_dir,
        dataset=args.dataset,
        tfds_dir=args.tfds_dir,
        max_examples=args.max_eval_examples,
    )
    return version_dir
