"""What `train.py` runs: data, training, export, evaluation, one after another.

The stages pass typed records: `RunData` (the run folder and what every
member trains on, with its schedule) and a `MemberOutcome` per member (its
folder, its model once finished, how its training ended), which each stage
returns anew. `models.training.schedule` decides when a member validates, stops and
has finished.
"""

import contextlib
import dataclasses
import functools
import shutil
import sys
import tempfile
from pathlib import Path

import keras
import tensorflow as tf

from models import data
from models.export import served_search
from models.export.saved_model import export
from models.model import members
from models.model.ensemble import SummarizerEnsemble
from models.model.members import MemberEnd, member_dirs, read_end
from models.model.run_folder import export_files, initial_model_files
from models.model.summarizer import in_multi_worker_mode
from models.settings.data import DataSource
from models.settings.errors import LostWorker, first_line
from models.settings.folder_layout import (
    BACKUP_DIR,
    LOGS_DIR,
    METRICS_FILE,
    MODEL_FILE,
    RISK_DIR,
    TEACHER_CACHE_DIR,
    TRAINING_CACHE,
    TRAINING_RECORD_FILE,
)
from models.settings.json_files import read_json, whole_file, write_json
from models.settings.train import TrainSettings
from models.training import chosen_lengths as lengths
from models.training import distill
from models.training.callbacks import TrainingCap, backed_up_state
from models.training.fit import RunData, finish_member, prepare_run, train_member
from models.training.prepared_run import write_prepared
from models.training.progress import CommandProgress, machine
from models.training.schedule import RiskSchedule, run_schedule

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


def load_splits(source: DataSource):
    """The training and validation splits of `source`."""
    return {s: data.load_split(s, source) for s in ("train", "validation")}


@dataclasses.dataclass(frozen=True)
class MemberOutcome:
    """Where one member of the ensemble stands after a stage.

    Attributes:
        rank: The member's rank, from 0.
        folder: Its folder in the run (`members.member_dirs`).
        validations: Validations it has run, in all.
        model: Its trained model; None while its training is unfinished.
        end: How its training ended; None while unfinished.
        minimum_risk: Its minimum-risk stage's record (`fine_tune`), None
            where the stage did not run.
    """

    rank: int
    folder: Path
    validations: int
    model: keras.Model | None = None
    end: MemberEnd | None = None
    minimum_risk: dict | None = None

    @property
    def served(self):
        """Whether it is served (`members.served`): its training has
        finished, and its minimum-risk stage where one ran."""
        risk = None if self.minimum_risk is None else self.minimum_risk["finished"]
        return members.served(self.model is not None, risk)

    def record(self, schedule):
        """Its line in `training.json` (and `metrics.json`)."""
        line = {
            "member": self.rank + 1,
            members.SERVED_KEY: self.served,
            "validations": self.validations,
            "examples": schedule.examples(self.validations),
        }
        if self.end is not None:
            line.update(dataclasses.asdict(self.end))
        if self.minimum_risk is not None:
            line["minimum_risk"] = self.minimum_risk
        return line


def _validation_data(split, features, config, options):
    """`(examples, batches)` of the validation loss: the first
    `validation_loss_examples` of `split`, encoded, and their batches."""
    examples = data.encode_dataset(
        split.take(options.validation_loss_examples), features
    )
    batches = _with_known_length(
        data.batched(
            examples,
            options.batch_size,
            training=False,
            max_source_length=config.max_source_length,
        )
    )
    return examples, batches


def _with_known_length(batches):
    """The validation `batches` with their number known to Keras.

    One pass (which fills the encoding cache that the first validation
    would fill) gives Keras a step count, and Keras no longer warns that the
    data "ran out".
    """
    count = data.count_batches(batches)
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
        # Not the data caches: the worker encodes its own examples, and
        # only the chief decodes a teacher.
        ignored = (LOGS_DIR, f"{TRAINING_CACHE}-*", TEACHER_CACHE_DIR)
        shutil.copytree(
            run_dir, scratch / "run", ignore=shutil.ignore_patterns(*ignored)
        )
    return scratch / "run"


def run(settings: TrainSettings, train_elsewhere=None):
    """Trains, exports and evaluates as `train.py`'s settings say.

    `train_elsewhere`: with `--backend` other than TensorFlow, what trains
    the members once the data is prepared (`train.py` runs its training
    process), before this process tunes, exports and scores them.
    """
    with contextlib.ExitStack() as cleanup:
        return _run(settings, cleanup, train_elsewhere)


def _run(settings, cleanup, train_elsewhere):
    options = settings.training
    progress = CommandProgress(options.ensemble)
    progress.stage("data", "loading and encoding")
    strategy = _configure_devices(settings)
    keras.utils.set_random_seed(options.seed)
    # Checked before the data loads: a mistyped folder fails at once.
    initial_weights = initial_model_files(
        settings.distillation.init_from, options.ensemble
    )
    source = settings.data
    splits = load_splits(source)
    run, search = _prepare(settings, splits, strategy, cleanup)
    if run.chief:
        # Copied into the export, where evaluation reads the feature names.
        source.write(run.run_dir)
    progress.training(run.schedule)
    # One cap for the whole command: every member, every stage.
    cap = TrainingCap(options.max_train_minutes, options.stop_after_validations)
    folders = member_dirs(run.run_dir, options.ensemble)
    if settings.run.backend == "tensorflow":
        outcomes = [
            _train_member(
                rank, folder, run, options, strategy, initial_weights, cap, progress
            )
            for rank, folder in enumerate(folders)
        ]
    else:
        # Another process trains the members (`array_training`); this one
        # reads what it left.
        progress.stage("training", f"on {settings.run.backend}, in its own process")
        train_elsewhere()
        outcomes = [
            _trained_member(rank, folder, f"member {rank + 1}", progress)
            for rank, folder in enumerate(folders)
        ]
    if settings.risk.risk_updates and run.chief:
        outcomes = _fine_tune_members(
            outcomes, run, options, settings.risk, cap, progress
        )
    if not run.chief:
        print(
            "Trained in step with the chief, which exports the model", file=sys.stderr
        )
        return None
    served = [o for o in outcomes if o.served]
    if not served:
        progress.finish()
        for line in _unfinished_lines(outcomes, run.schedule):
            print(f"[train.py] {line}", file=sys.stderr)
        print(
            "[train.py] no member has finished, so nothing is exported: run the "
            "same command again to finish them",
            file=sys.stderr,
        )
        return None
    models = [o.model for o in served]
    model = models[0] if len(models) == 1 else SummarizerEnsemble(models)
    checks = {}
    # Scored on validation even when nothing is tuned: the check against the
    # lead baseline reads the served setting's scores.
    if settings.tuning.tune_examples > 0:
        progress.stage("tuning", "the search's settings, on validation")
        search, checks = served_search.choose(
            settings, model, run.features, splits["validation"], search, run.run_dir
        )
    record = {
        "backend": _backend(served),
        "schedule": run.schedule.to_dict(),
        "members": [o.record(run.schedule) for o in outcomes],
        "served_members": len(served),
        "machine": _machine(),
        **checks,
    }
    version_dir = _export_and_evaluate(settings, run, model, search, record, progress)
    _print_summary(version_dir, outcomes, run.schedule, progress)
    served_search.print_verdicts(checks, settings, version_dir)
    return version_dir


def _backend(served):
    """The Keras backend the served members trained on (`"mixed"`: more
    than one)."""
    backends = {o.end.backend if o.end else "tensorflow" for o in served}
    return backends.pop() if len(backends) == 1 else "mixed"


def _machine():
    gpus = [
        tf.config.experimental.get_device_details(d).get("device_name", d.name)
        for d in tf.config.list_physical_devices("GPU")
    ]
    return {**machine(), **({"gpus": gpus} if gpus else {})}


def _unfinished_lines(outcomes, schedule):
    """A line for each member that is not served: how far it got."""
    lines = []
    for o in outcomes:
        if o.served:
            continue
        if o.model is None:
            lines.append(
                f"member {o.rank + 1} is unfinished ({o.validations} validations, "
                f"{schedule.examples(o.validations):,} examples) and is not "
                "served: run the same command again to finish it"
            )
        else:
            lines.append(
                f"member {o.rank + 1}'s minimum-risk fine-tuning is unfinished "
                f"({o.minimum_risk['updates']} updates) and it is not served: run "
                "the same command again to finish it"
            )
    return lines


def _print_summary(version_dir, outcomes, schedule, progress):
    """The command's last lines: what is served, what is not, and why."""
    served = [o for o in outcomes if o.served]
    trained = ", ".join(str(o.validations) for o in served)
    examples = ", ".join(f"{schedule.examples(o.validations):,}" for o in served)
    lines = [
        f"served: {len(served)} of {len(outcomes)} members ({trained} "
        f"validations; {examples} examples) in {version_dir}"
    ]
    lines += [
        line + " and export the whole ensemble"
        for line in _unfinished_lines(outcomes, schedule)
    ]
    total = sum(progress.stage_seconds.values())
    lines.append(f"wall time {total / 60:.1f} min")
    for line in lines:
        print(f"[train.py] {line}", file=sys.stderr)


def _prepare(settings, splits, strategy, cleanup):
    """The run folder, its config, vocabulary and schedule, and the encoded
    data; and the search, its limit settled with the config."""
    options = settings.training
    train_split = splits["train"]
    if settings.run.max_train_examples:
        train_split = train_split.take(settings.run.max_train_examples)
    run_dir = settings.run.run_path()
    chief = strategy is None or strategy.extended.should_checkpoint
    if not chief:
        run_dir = _worker_run_dir(run_dir, cleanup)
    distillation = settings.distillation
    init_from = distillation.init_from
    config, search = lengths.settle_config(
        run_dir, train_split, settings.data, settings.model, settings.search, init_from
    )
    if distillation.distill_from:
        train_split = distill.distilled_split(
            train_split,
            distillation.distill_from,
            run_dir,
            distillation.distill_targets,
            distillation.distill_min_overlap,
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
    validation_examples, validation_batches = _validation_data(
        splits["validation"], features, config, options
    )
    sample = tuple(
        splits["validation"].take(options.validation_rouge_examples).as_numpy_iterator()
    )
    examples = data.cached_examples(data.encode_dataset(train_split, features), run_dir)
    # One pass, which fills the cache: its batches, whatever its order.
    one_pass = data.pass_batches(
        examples,
        options.batch_size,
        seed=options.seed,
        index=0,
        max_source_length=config.max_source_length,
    )
    if chief and (settings.run.prepare_arrays or settings.run.backend != "tensorflow"):
        write_prepared(
            run_dir,
            {"train": examples, "validation": validation_examples},
            sample,
            features,
            settings,
        )
    return RunData(
        run_dir=run_dir,
        chief=chief,
        config=config,
        features=features,
        examples=examples,
        validation_batches=validation_batches,
        sample=sample,
        schedule=run_schedule(run_dir, options, data.count_batches(one_pass)),
    ), search


def _trained_member(rank, folder, stage, progress):
    """Member `rank` as its folder holds it: finished (its model loaded),
    or where its backup left it."""
    end = read_end(folder)
    if end is None:
        return MemberOutcome(rank, folder, backed_up_state(folder)[0])
    progress.member_done(rank, end.validations)
    detail = f"{end.validations} validations, {end.reason}"
    if end.backend != "tensorflow":
        detail += f", on {end.backend}"
    progress.stage(stage, f"finished earlier ({detail})")
    model = keras.saving.load_model(folder / MODEL_FILE, compile=False)
    return MemberOutcome(rank, folder, end.validations, model, end)


def _train_member(rank, folder, run, options, strategy, initial_weights, cap, progress):
    """Member `rank` of the ensemble, trained or resumed in `folder` unless
    it has finished, as a `MemberOutcome`. Once a cap has cut one member,
    the later ones wait for the next command."""
    stage = f"member {rank + 1}/{options.ensemble}"
    outcome = _trained_member(rank, folder, stage, progress)
    if outcome.end is not None or cap.spent():
        return outcome
    validations = outcome.validations
    seed = options.seed + rank
    progress.stage(stage, f"training (seed {seed}, from validation {validations + 1})")

    def on_validation(*report):
        progress.validation(rank, *report)

    try:
        model, fit_end = train_member(
            folder,
            run,
            dataclasses.replace(options, seed=seed),
            strategy,
            start_from=initial_weights.get(rank),
            cap=cap,
            on_validation=on_validation,
        )
    except _COLLECTIVE_ERRORS as error:
        if not in_multi_worker_mode(strategy):
            raise
        raise LostWorker(
            "a worker left the cluster, so all stopped "
            f"({type(error).__name__}: {first_line(error)}); "
            "run the same command on every worker to resume from the last backup"
        ) from None
    if not fit_end.finished:
        return MemberOutcome(rank, folder, fit_end.validations)
    end = finish_member(folder, model, fit_end, run.schedule, save=run.chief)
    progress.member_done(rank, end.validations)
    return MemberOutcome(rank, folder, end.validations, model, end)


def _fine_tune_members(outcomes, run, options, risk, cap, progress):
    """Minimum-risk fine-tuning of each trained member in its own folder
    (`models.training.risk_fine_tuning`), bounded by the command's `cap`; returns the
    outcomes with the stage's records."""
    from models.training.risk_fine_tuning import fine_tune

    encoded = run.examples
    if risk.risk_examples:
        encoded = encoded.take(risk.risk_examples)
    documents = [d for d, _ in run.sample]
    references = [s.decode("utf-8") for _, s in run.sample]
    trained = [o for o in outcomes if o.model is not None]
    schedule = RiskSchedule.make(risk)
    progress.minimum_risk(schedule, len(trained))
    tuned = {}
    for i, outcome in enumerate(trained):
        progress.stage(
            f"minimum risk, member {i + 1}/{len(trained)}",
            f"updates of {options.batch_size} examples; {schedule.describe()}",
        )
        record = fine_tune(
            outcome.model,
            encoded,
            (documents, references),
            run.features,
            risk,
            outcome.folder,
            schedule=schedule,
            batch_size=options.batch_size,
            seed=options.seed,
            cap=cap,
            on_validation=functools.partial(progress.risk_validation, i),
        )
        if record["finished"]:
            # Its presence says the stage finished (`members.is_served`).
            with whole_file(outcome.folder / RISK_DIR / MODEL_FILE) as partial:
                outcome.model.save(partial)
            progress.risk_done(i, record["updates"])
        tuned[outcome.rank] = dataclasses.replace(outcome, minimum_risk=record)
    return [tuned.get(o.rank, o) for o in outcomes]


def _export_and_evaluate(settings, run, model, search, record, progress):
    """Exports `model`; scores the export unless `--skip-eval`.

    `record` (members, machine) goes into the export as `training.json`
    with the stages' wall times, and from there into `metrics.json`.
    """
    progress.stage("export")
    export_dir = settings.run.export_path()
    # The served members' files only: a rerun with a smaller `--ensemble`
    # leaves the others' folders in the run.
    files = export_files(run.run_dir, members=record["served_members"])
    version_dir = export(
        model, run.features, export_dir, options=search, extra_files=files
    )
    print(f"Exported {version_dir}", file=sys.stderr)
    evaluation = settings.evaluation
    if not evaluation.skip_eval:
        from models.evaluation import evaluate

        progress.stage("evaluation", f"the {evaluation.eval_split} split")
        evaluate.evaluate(
            version_dir,
            # The N the validation check chose: `training.json` comes later.
            lead_tokens=record.get("validation_check", {}).get("lead_tokens"),
            split=evaluation.eval_split,
            source=settings.data,
            max_examples=evaluation.max_eval_examples,
        )
    record["stage_seconds"] = progress.finish()
    _write_training_record(Path(version_dir), record)
    return version_dir


def _write_training_record(version_dir, record):
    """`training.json` in the export, and in its `metrics.json` if written."""
    write_json(version_dir / TRAINING_RECORD_FILE, record)
    metrics_path = version_dir / METRICS_FILE
    metrics = read_json(metrics_path)
    if metrics is not None:
        metrics["training"] = record
        write_json(metrics_path, metrics)
