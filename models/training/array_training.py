"""The members trained on JAX, in a process without TensorFlow
(`train.py --backend jax`).

The process reads what the TensorFlow process that prepared the run wrote
(`models.training.prepared_run`): the run's config, vocabulary and schedule,
the token-id arrays of its training and validation examples, and its
validation ROUGE sample. Each member trains as on TensorFlow: the same
`models.training.fit.fit` (the schedule counted in examples, the averaged
weights, validation ROUGE-1 choosing the best weights and stopping early,
backups at each validation that resume a killed process exactly), on
`ArrayBatches` from where its backup left the stream, validating with the
export's greedy search on ids (`models.decoding.id_search`), compiled by
`jax.jit`. A finished member's `model.keras` and `training_end.json` are
what a TensorFlow process reads to tune, export and score, as when it
trained them itself.
"""

import contextlib
import dataclasses
from pathlib import Path

import keras

from models.data.arrays import ArrayBatches, PreparedArrays, source_buckets
from models.decoding.id_search import IdHeadlines
from models.model.members import member_dirs, read_end
from models.model.run_folder import load_config_and_vocabulary
from models.settings.errors import UserError
from models.settings.folder_layout import (
    CONFIG_FILE,
    LOGS_DIR,
    PREPARED_DIR,
    PREPARED_MANIFEST_FILE,
)
from models.settings.json_files import read_json
from models.settings.search import SearchOptions
from models.training import devices
from models.training.callbacks import TrainingCap, ValidationRouge, backed_up_state
from models.training.fit import build_model, finish_member, fit
from models.training.progress import CommandProgress
from models.training.schedule import Schedule

# What the training process prints when the members are trained: the rest
# is TensorFlow's.
NEXT_STEP = (
    "members trained on {backend}; where TensorFlow is installed, the same "
    "command without --backend tunes the search, exports and scores them"
)


def prepare_command(settings):
    """The command that prepares the run for `settings` (one line)."""
    return (
        f"python train.py --backend {settings.run.backend} --run-dir "
        f"{settings.run.run_path()}` with this command's other flags, where "
        "TensorFlow is installed"
    )


def read_manifest(settings):
    """The run's prepared manifest, checked against `settings`' flags.

    Raises:
        UserError: nothing is prepared, or it was prepared with other flags.
    """
    from models.training.prepared_run import manifest_flags

    run_dir = settings.run.run_path()
    manifest = read_json(run_dir / PREPARED_DIR / PREPARED_MANIFEST_FILE)
    if manifest is None or not (run_dir / CONFIG_FILE).is_file():
        raise UserError(
            f"`--backend {settings.run.backend}` trains on the examples "
            f"prepared in {run_dir / PREPARED_DIR}, and there are none: "
            f"prepare them with `{prepare_command(settings)}. "
            f"Received: run_dir={str(run_dir)!r}"
        )
    for flag, value in manifest_flags(settings).items():
        if manifest.get(flag) != value:
            raise UserError(
                f"The examples in {run_dir / PREPARED_DIR} were prepared with "
                f"--{flag.replace('_', '-')} {manifest.get(flag)}: give the same, "
                f"or prepare again with `{prepare_command(settings)}. "
                f"Received: {flag}={value}"
            )
    return manifest


@dataclasses.dataclass(frozen=True)
class ArrayRun:
    """What every member of a run trains with, read without TensorFlow."""

    run_dir: Path
    config: object  # SummarizerConfig
    schedule: Schedule
    train: PreparedArrays
    validation: PreparedArrays
    headlines: IdHeadlines
    boundaries: tuple


def load_array_run(settings):
    """The `ArrayRun` of the prepared run that `settings` name."""
    manifest = read_manifest(settings)
    run_dir = settings.run.run_path()
    config, vocabulary = load_config_and_vocabulary(run_dir)
    schedule = Schedule.load(run_dir)
    prepared = run_dir / PREPARED_DIR
    train = PreparedArrays(prepared / manifest["train"])
    boundaries = source_buckets(config.max_source_length)
    batches = ArrayBatches(
        train, schedule.batch_size, boundaries, config.max_source_length
    )
    if batches.pass_size != schedule.pass_batches:
        raise UserError(
            f"The prepared training examples make {batches.pass_size} batches a "
            f"pass, and the run's schedule counts {schedule.pass_batches}: "
            f"prepare them again with `{prepare_command(settings)}. "
            f"Received: run_dir={str(run_dir)!r}"
        )
    return ArrayRun(
        run_dir=run_dir,
        config=config,
        schedule=schedule,
        train=train,
        validation=PreparedArrays(prepared / manifest["validation"]),
        headlines=IdHeadlines(
            prepared / manifest["rouge"],
            vocabulary,
            SearchOptions(),
            batch_size=schedule.batch_size,
        ),
        boundaries=boundaries,
    )


def train_member_on_arrays(
    folder,
    run,
    options,
    *,
    cap=None,
    on_validation=None,
    callbacks=(),
    shard=(0, 1),
):
    """Trains (or resumes) one member in `folder` on `run`'s arrays, as
    `models.training.fit.train_member` on TensorFlow; returns
    `(model, FitEnd)`. `callbacks`: more Keras callbacks for its fit
    (benchmarks.gpu_check times the steps). `shard`: `(process, processes)`,
    the rows of every global batch this process reads
    (`models.training.devices`)."""
    folder.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(options.seed)
    validations, _ = backed_up_state(folder)
    size, length = run.schedule.batch_size, run.config.max_source_length
    train_batches = ArrayBatches(
        run.train,
        size,
        run.boundaries,
        length,
        seed=options.seed,
        start=run.schedule.start(validations),
        shard=shard,
    )
    validation_batches = ArrayBatches(
        run.validation,
        size,
        run.boundaries,
        length,
        passes=1,
        shuffle=False,
        shard=shard,
    )
    rouge = ValidationRouge(
        run.headlines, run.headlines.references, log_dir=folder / LOGS_DIR / "rouge"
    )
    model = build_model(run.config, options)
    end = fit(
        model,
        train_batches,
        validation_batches,
        folder,
        options,
        [rouge, *callbacks],
        schedule=run.schedule,
        cap=cap,
        on_validation=on_validation,
    )
    return model, end


def train_members(settings):
    """Trains the run's unfinished members on the backend Keras runs on,
    over every device of every process (`models.training.devices`);
    returns the number of members finished."""
    hosts = settings.run
    devices.start_processes(hosts.coordinator, hosts.num_processes, hosts.process_id)
    shard = devices.data_parallel(settings.training.batch_size)
    with contextlib.ExitStack() as cleanup:
        run = load_array_run(settings)
        folder = devices.run_folder(run.run_dir, shard[0], cleanup)
        return _train_members(settings, dataclasses.replace(run, run_dir=folder), shard)


def _train_members(settings, run, shard):
    """`train_members` of `run` (its `run_dir` the folder this process
    writes) on this process's `shard` of every batch."""
    options = settings.training
    backend = keras.backend.backend()
    progress = CommandProgress(options.ensemble)
    progress.stage("data", "reading the prepared examples")
    if shard[1] > 1:
        print(
            f"Process {shard[0]} of {shard[1]}: "
            f"{len(keras.distribution.list_devices())} devices in all",
            flush=True,
        )
    print(
        f"Resuming run {run.run_dir} on {backend}: vocabulary "
        f"{run.config.vocab_size} words, {len(run.train):,} training examples",
        flush=True,
    )
    progress.training(run.schedule)
    cap = TrainingCap(options.max_train_minutes, options.stop_after_validations)
    finished = 0
    for rank, folder in enumerate(member_dirs(run.run_dir, options.ensemble)):
        stage = f"member {rank + 1}/{options.ensemble}"
        end = read_end(folder)
        if end is not None:
            progress.member_done(rank, end.validations)
            progress.stage(stage, f"finished earlier ({end.validations} validations)")
            finished += 1
            continue
        if cap.spent():
            break
        validations, _ = backed_up_state(folder)
        seed = options.seed + rank
        progress.stage(
            stage,
            f"training on {backend} (seed {seed}, from validation {validations + 1})",
        )
        model, fit_end = train_member_on_arrays(
            folder,
            run,
            # Compiled whatever `--jit-compile` says (TensorFlow's XLA
            # switch): JAX runs an uncompiled step op by op.
            dataclasses.replace(options, seed=seed, jit_compile=True),
            cap=cap,
            on_validation=lambda *report, k=rank: progress.validation(k, *report),
            shard=shard,
        )
        if fit_end.finished:
            # Every process saves (a save gathers the weights, in step): the
            # others into their scratch copy.
            finish_member(folder, model, fit_end, run.schedule)
            progress.member_done(rank, fit_end.validations)
            finished += 1
    progress.finish()
    return finished
