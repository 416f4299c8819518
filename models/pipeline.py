"""What `train.py` runs: data, training, export, evaluation, one after another."""

import contextlib
import dataclasses
import json
import shutil
import sys
import tempfile
from pathlib import Path

import keras
import tensorflow as tf

from models import data, distill, text, tuning
from models.callbacks import TrainingCap
from models.config import SummarizerConfig
from models.distribute import in_multi_worker_mode
from models.ensemble import SummarizerEnsemble
from models.errors import LostWorker, UserError, first_line
from models.export import export
from models.folder_layout import (
    BACKUP_DIR,
    CONFIG_FILE,
    LOGS_DIR,
    METRICS_FILE,
    MODEL_FILE,
    RISK_DIR,
    SEARCH_TUNING_FILE,
    TRAINING_RECORD_FILE,
    VOCABULARY_FILE,
)
from models.members import (
    MemberEnd,
    finished_end,
    member_dirs,
    write_end,
)
from models.progress import CommandProgress, machine
from models.run_folder import model_files
from models.text_features import TextFeatures
from models.train_settings import (
    DataSettings,
    TrainSettings,
    TuningSettings,
)
from models.training import (
    ValidationRouge,
    backed_up_epoch,
    build_model,
    fit,
    prepare_run,
)

_COLLECTIVE_TIMEOUT_S = 600

# What collective ops raise when a peer dies or stops answering.
_COLLECTIVE_ERRORS = (
    tf.errors.UnavailableError,
    tf.errors.DeadlineExceededError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
    tf.errors.InternalError,
)


def _configure_devices(settings: TrainSettings):
    cpu_devices, strategy = settings.run.cpu_devices, settings.run.strategy
    if cpu_devices > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * cpu_devices
        )
    if settings.training.mixed_precision:
        import keras

        keras.mixed_precision.set_global_policy(settings.training.mixed_precision)
    if strategy == "mirrored":
        return tf.distribute.MirroredStrategy()
    if strategy == "multi_worker":
        # A killed worker's peers fail at once (its connections close); one
        # that hangs would keep them waiting forever but for a timeout, far
        # longer than the gap between two workers reaching the same step.
        return tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                timeout_seconds=_COLLECTIVE_TIMEOUT_S
            )
        )
    return None


def load_splits(settings: DataSettings):
    """The training and validation splits that `settings` name."""
    kwargs = dict(
        data_dir=settings.data_dir,
        dataset=settings.dataset,
        document_key=settings.document_key,
        summary_key=settings.summary_key,
    )
    if settings.tfds_dir:
        kwargs["tfds_dir"] = settings.tfds_dir
    return {s: data.load_split(s, **kwargs) for s in ("train", "validation")}


def default_normalization(settings: DataSettings, train_split, sample=1000):
    """`gigaword` for Gigaword's own text, `general` for any other data."""
    if settings.dataset != "gigaword":
        return "general"
    if not settings.data_dir:
        return "gigaword"
    pairs = train_split.take(sample).as_numpy_iterator()
    return text.guess_normalization(s.decode("utf-8") for p in pairs for s in p)


def _tune_decoding(
    settings: TuningSettings, model, features, validation, search, run_dir
):
    """`search` with the validation-best length penalty and n-gram blocking,
    and greedy search's end penalty."""
    pairs = list(validation.take(settings.tune_examples).as_numpy_iterator())
    if not pairs:
        return search
    print(
        f"Tuning the length penalty and n-gram blocking on {len(pairs)} "
        "validation examples",
        file=sys.stderr,
    )
    sample = (model, features, [d for d, _ in pairs], [s.decode() for _, s in pairs])
    chosen, rows = tuning.tune_search_options(
        *sample, search, settings.tune_length_penalties, settings.tune_ngram_sizes
    )
    print(tuning.format_rows(rows, chosen), file=sys.stderr)
    record = {"grid": rows}
    if settings.tune_end_penalties:
        print("Tuning greedy search's end penalty", file=sys.stderr)
        chosen, greedy_rows = tuning.tune_greedy_end_penalty(
            *sample, chosen, settings.tune_end_penalties
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
    strategy: tf.distribute.Strategy | None  # None: the default strategy
    config: SummarizerConfig
    features: TextFeatures
    encoded: tf.data.Dataset  # the training split's examples
    validation_batches: tf.data.Dataset
    # Validation (document, summary) pairs for ROUGE after each epoch.
    sample: list[tuple[bytes, bytes]]
    # Member k starts from the k-th `model.keras`, if any.
    initial_weights: list[Path]
    progress: CommandProgress


def _train_member(run_dir, run, options, member_rank, cap):
    """Trains one model (an ensemble's member) in `run_dir`, resuming.

    Returns `(model, FitEnd)`.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(options.seed)
    first_epoch = min(backed_up_epoch(run_dir), options.epochs - 1)
    train_batches, steps = data.epoch_batches(
        run.encoded,
        options.batch_size,
        seed=options.seed,
        epochs=range(first_epoch, options.epochs),
        steps_per_epoch=options.steps_per_epoch,
        cache_file=data.training_cache(run.encoded, run.run_dir),
    )
    callbacks = []
    if run.sample:
        callbacks.append(
            ValidationRouge(
                run.features,
                [d for d, _ in run.sample],
                [s.decode("utf-8") for _, s in run.sample],
                log_dir=run_dir / LOGS_DIR / "rouge",
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

    def on_epoch(*report):
        run.progress.epoch_end(member_rank, *report)

    try:
        end = fit(
            model,
            train_batches,
            run.validation_batches,
            run_dir,
            options,
            callbacks,
            cap=cap,
            steps_per_epoch=steps,
            on_epoch=on_epoch,
        )
    except _COLLECTIVE_ERRORS as error:
        if not in_multi_worker_mode(strategy):
            raise
        raise LostWorker(
            "a worker left the cluster, so all stopped "
            f"({type(error).__name__}: {first_line(error)}); "
            "run the same command on every worker to resume from the last backup"
        ) from None
    return model, end


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
    if (run_dir / BACKUP_DIR).exists():
        shutil.copytree(
            run_dir, scratch / "run", ignore=shutil.ignore_patterns(LOGS_DIR)
        )
    return scratch / "run"


def run(settings: TrainSettings):
    """Trains, exports and evaluates as `train.py`'s settings say."""
    with contextlib.ExitStack() as cleanup:
        return _run(settings, cleanup)


def _run(settings, cleanup):
    options, search = settings.training, settings.search
    progress = CommandProgress(options.ensemble, options.epochs, options.patience)
    progress.stage("data", "loading and encoding")
    strategy = _configure_devices(settings)
    keras.utils.set_random_seed(options.seed)
    # Checked before the data loads: a mistyped folder fails at once.
    initial_weights = _initial_weights(
        settings.distillation.init_from, options.ensemble
    )
    splits = load_splits(settings.data)
    run = _prepare(settings, splits, strategy, cleanup, initial_weights, progress)
    members, ends = _train_members(run, options)
    risk = settings.risk
    if risk.risk_epochs and run.chief:
        _fine_tune_members(run, options, risk, members, ends)
    if not run.chief:
        print(
            "Trained in step with the chief, which exports the model", file=sys.stderr
        )
        return None
    unfinished = [e["member"] for e in ends if not e["finished"]]
    if not members:
        progress.finish()
        print(
            f"[train.py] no member has finished (member {unfinished[0]} stopped "
            f"after {ends[unfinished[0] - 1]['epochs']} epochs by the cap), so "
            "nothing is exported: run the same command again to finish it",
            file=sys.stderr,
        )
        return None
    model = members[0] if len(members) == 1 else SummarizerEnsemble(members)
    if settings.tuning.tune_decoding and settings.tuning.tune_examples > 0:
        progress.stage("tuning", "the search's settings, on validation")
        search = _tune_decoding(
            settings.tuning,
            model,
            run.features,
            splits["validation"],
            search,
            run.run_dir,
        )
    record = {"members": ends, "served_members": len(members), "machine": _machine()}
    version_dir = _export_and_evaluate(settings, run, model, search, record, progress)
    _print_summary(version_dir, ends, options, progress)
    return version_dir


def _machine():
    gpus = [
        tf.config.experimental.get_device_details(d).get("device_name", d.name)
        for d in tf.config.list_physical_devices("GPU")
    ]
    return {**machine(), **({"gpus": gpus} if gpus else {})}


def _print_summary(version_dir, ends, options, progress):
    """The command's last lines: what is served, what is not, and why."""
    done = [e for e in ends if e["finished"]]
    trained = ", ".join(f"{e['epochs']}" for e in done)
    lines = [
        f"served: {len(done)} of {options.ensemble} members "
        f"({trained} epochs) in {version_dir}"
    ]
    for e in ends:
        if not e["finished"]:
            lines.append(
                f"member {e['member']} is unfinished ({e['epochs']} of at most "
                f"{options.epochs} epochs) and is not served: run the same "
                "command again to finish it and export the whole ensemble"
            )
    total = sum(progress.stage_seconds.values())
    lines.append(f"wall time {total / 60:.1f} min")
    for line in lines:
        print(f"[train.py] {line}", file=sys.stderr)


def _prepare(settings, splits, strategy, cleanup, initial_weights, progress):
    """The run folder, its config and vocabulary, and the encoded data."""
    options = settings.training
    # A copy: the run sets the vocabulary size (and may set the normalization).
    config = dataclasses.replace(settings.model)
    train_split = splits["train"]
    if settings.data.max_train_examples:
        train_split = train_split.take(settings.data.max_train_examples)
    if settings.choose_normalization:
        config.normalization = default_normalization(settings.data, train_split)
    run_dir = settings.run.run_path()
    chief = strategy is None or strategy.extended.should_checkpoint
    if not chief:
        run_dir = _worker_run_dir(run_dir, cleanup)
    distillation = settings.distillation
    init_from = distillation.init_from
    if distillation.distill_from:
        train_split = distill.distilled_split(
            train_split,
            distillation.distill_from,
            run_dir,
            distillation.distill_targets,
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
        progress=progress,
    )


def _initial_weights(init_from, members):
    """The `model.keras` files that `members` members start from, in order."""
    if not init_from:
        return []
    init_from = Path(init_from)
    files = list(model_files(init_from).values())
    needed = [
        init_from / CONFIG_FILE,
        init_from / VOCABULARY_FILE,
        files[0] if files else init_from / MODEL_FILE,
    ]
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
    """Trains the ensemble's members in turn (one: the model), resuming.

    Returns `(models, ends)`: the finished members' models, in order, and a
    line of record per member (`MemberEnd` fields, or how far an unfinished
    one got). Members train in order; once a cap cuts one, the later ones
    wait for the next command.
    """
    cap = TrainingCap(options.max_train_minutes, options.stop_after_epochs)
    models, ends = [], []
    for k, member_dir in enumerate(member_dirs(run.run_dir, options.ensemble)):
        end, note = finished_end(member_dir, options.epochs)
        if note:
            print(note, file=sys.stderr)
            if end is not None and run.chief:
                write_end(member_dir, end)  # the rule's verdict, kept
        if end is not None and (
            end.reason != "epoch_limit" or end.epochs >= options.epochs
        ):
            if end.epochs:
                run.progress.member_done(k, end.epochs)
            run.progress.stage(
                f"member {k + 1}/{options.ensemble}",
                f"finished earlier ({end.epochs} epochs, {end.reason})",
            )
            models.append(
                keras.saving.load_model(member_dir / MODEL_FILE, compile=False)
            )
            ends.append({"member": k + 1, "finished": True, **dataclasses.asdict(end)})
            continue
        if cap.spent():
            ends.append(_unfinished(k, member_dir))
            continue
        run.progress.stage(
            f"member {k + 1}/{options.ensemble}",
            f"training (seed {options.seed + k}, at most {options.epochs} epochs, "
            f"from epoch {backed_up_epoch(member_dir) + 1})",
        )
        member_options = dataclasses.replace(options, seed=options.seed + k)
        model, fit_end = _train_member(member_dir, run, member_options, k, cap)
        if not fit_end.finished(options.epochs):
            ends.append(_unfinished(k, member_dir))
            continue
        end = MemberEnd(
            epochs=fit_end.epochs,
            reason="early_stopping" if fit_end.early_stopped else "epoch_limit",
            best=fit_end.best,
            best_epoch=fit_end.best_epoch,
            monitor=fit_end.monitor,
        )
        if run.chief:
            model.save(member_dir / MODEL_FILE)
            write_end(member_dir, end)
        run.progress.member_done(k, end.epochs)
        models.append(model)
        ends.append({"member": k + 1, "finished": True, **dataclasses.asdict(end)})
    return models, ends


def _fine_tune_members(run, options, risk, members, ends):
    """Minimum-risk fine-tuning of each finished member, in place
    (`models.risk_fine_tuning`); its record joins the member's."""
    from models.risk_fine_tuning import fine_tune

    encoded = run.encoded
    if risk.risk_examples:
        encoded = encoded.take(risk.risk_examples)
    batches = data.batched(
        encoded, options.batch_size, training=True, seed=options.seed
    )
    steps = int(batches.reduce(0, lambda count, _: count + 1))
    documents = [d for d, _ in run.sample]
    references = [s.decode("utf-8") for _, s in run.sample]
    dirs = member_dirs(run.run_dir, options.ensemble)
    for k, model in enumerate(members):
        run.progress.stage(
            f"minimum risk, member {k + 1}/{len(members)}",
            f"at most {risk.risk_epochs} epochs of {steps} batches",
        )
        record = fine_tune(
            model, batches, steps, (documents, references), run.features, risk, dirs[k]
        )
        model.save(dirs[k] / RISK_DIR / MODEL_FILE)
        ends[k]["minimum_risk"] = record


def _unfinished(k, member_dir):
    return {"member": k + 1, "finished": False, "epochs": backed_up_epoch(member_dir)}


def _export_and_evaluate(settings, run, model, search, record, progress):
    """Exports `model`; scores the export unless `--skip-eval`.

    `record` (members, machine) goes into the export as `training.json`
    with the stages' wall times, and from there into `metrics.json`.
    """
    progress.stage("export")
    export_dir = settings.run.export_path()
    files = {
        CONFIG_FILE: run.run_dir / CONFIG_FILE,
        VOCABULARY_FILE: run.run_dir / VOCABULARY_FILE,
    }
    files.update(model_files(run.run_dir))
    version_dir = export(
        model, run.features, export_dir, options=search, extra_files=files
    )
    print(f"Exported {version_dir}", file=sys.stderr)
    evaluation, data_settings = settings.evaluation, settings.data
    if not evaluation.skip_eval:
        from models import evaluate

        progress.stage("evaluation", f"the {evaluation.eval_split} split")
        evaluate.evaluate(
            version_dir,
            split=evaluation.eval_split,
            data_dir=data_settings.data_dir,
            dataset=data_settings.dataset,
            tfds_dir=data_settings.tfds_dir,
            max_examples=evaluation.max_eval_examples,
        )
    record["stage_seconds"] = progress.finish()
    _write_training_record(Path(version_dir), record)
    return version_dir


def _write_training_record(version_dir, record):
    """`training.json` in the export, and in its `metrics.json` if written."""
    (version_dir / TRAINING_RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")
    metrics_path = version_dir / METRICS_FILE
    if metrics_path.is_file():
        metrics = json.loads(metrics_path.read_text())
        metrics["training"] = record
        metrics_path.write_text(json.dumps(metrics, indent=2) + "\n")
