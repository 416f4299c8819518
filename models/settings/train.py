"""`train.py`'s settings: typed records, each flag a field of one.

`train.py`'s command line is generated from these records and the model's,
training's, search's and minimum risk's (`FLAG_GROUPS`, through
`models.settings.flags`), and parsed back once into a `TrainSettings`
(`train_settings`); the pipeline (`models.pipeline.run`) reads its fields
and no `argparse.Namespace`. A `TrainSettings()` holds every flag's
default (`TRAIN_DEFAULTS`: `--max-length`'s is None, the run's headline
length), and a field's `help` metadata, or the record's docstring, its
flag's help.

Plain dataclasses with no TensorFlow import, like `models.settings.model`.
"""

import dataclasses
from pathlib import Path

from models.settings.data import DataSource
from models.settings.errors import UserError
from models.settings.fit import TrainOptions
from models.settings.flags import FLAG, add_config_flags, choices
from models.settings.model import SummarizerConfig
from models.settings.risk import RiskOptions
from models.settings.search import SearchOptions
from models.settings.startup import verbose_field

# How greedy search's end penalty is chosen (`TuningSettings.greedy_length`).
GREEDY_LENGTHS = ("rouge", "teacher")
STRATEGIES = ("default", "mirrored", "multi_worker")
# The backends `train.py` trains the members on (`--backend`); torch is
# named to be refused with its reason (`TrainSettings._check_backend`).
BACKENDS = ("tensorflow", "jax", "torch")
# `models.training.distill.TARGETS`, which the distillation reads.
DISTILL_TARGETS = ("teacher", "mixed", "inter", "inter-mixed")


def _flag(default, help, **options):
    """A field whose flag has `help` and the `add_argument` `options`."""
    if isinstance(default, list):
        return dataclasses.field(
            default_factory=lambda: list(default),
            metadata={"help": help, **options},
        )
    return dataclasses.field(default=default, metadata={"help": help, **options})


# Where `train.py`'s default differs from its record's: the search's limit
# is the run's headline length (settled with the run's config), an export's
# is its record's.
TRAIN_DEFAULTS = {"search": {"max_length": None}}


def _record(make):
    """A field holding a record made by `make()`, whose own fields are the
    flags (the field itself is none)."""
    return dataclasses.field(default_factory=make, metadata={FLAG: False})


@dataclasses.dataclass
class RunSettings:
    """The run's name, its folders, the training pairs it reads and its
    devices (each field's help: its flag's)."""

    name: str = _flag("headlines", "model name")
    run_dir: str | None = _flag(
        None, "checkpoints, logs, vocabulary (None: runs/<name>)"
    )
    export_dir: str | None = _flag(
        None, "SavedModel versions (None: saved_models/<name>)"
    )
    max_train_examples: int | None = _flag(None, "use only the first N training pairs")
    strategy: str = _flag("default", "tf.distribute strategy", **choices(STRATEGIES))
    cpu_devices: int = _flag(
        1, "split the CPU into N logical devices (to try --strategy mirrored)"
    )
    backend: str = _flag(
        "tensorflow",
        "the Keras backend the members train on: jax trains them in a "
        "process without TensorFlow, on the prepared arrays (implies "
        "--prepare-arrays); TensorFlow prepares the data, tunes, exports "
        "and scores",
        **choices(BACKENDS),
    )
    coordinator: str | None = _flag(
        None,
        "host:port of process 0 of a multi-host JAX run (with "
        "--num-processes and --process-id; jax.distributed.initialize)",
    )
    num_processes: int | None = _flag(
        None, "the processes of a multi-host JAX run, one a host"
    )
    process_id: int | None = _flag(
        None, "this process's index in a multi-host JAX run (0 keeps the run)"
    )
    prepare_arrays: bool = _flag(
        False,
        "also write the training and validation examples as token-id arrays "
        "into <run>/prepared/ (models.data.arrays), read without TensorFlow",
        action="store_true",
    )

    def run_path(self):
        """The run folder: `run_dir`, else `runs/<name>`."""
        return Path(self.run_dir or f"runs/{self.name}")

    def export_path(self):
        """The export's model folder: `export_dir`, else `saved_models/<name>`."""
        return Path(self.export_dir or f"saved_models/{self.name}")


@dataclasses.dataclass
class DistillationSettings:
    """A student's teacher, and the run a model starts from (each field's
    help: its flag's)."""

    distill_from: str | None = _flag(
        None,
        "train a student on the headlines of this exported teacher "
        "(saved_models/<name>/<version>), decoded once and cached in the run "
        "folder (models.training.distill). It sets the student recipe's defaults: "
        "--name headlines-student, --distill-targets inter, --init-from "
        "TEACHER, --learning-rate 5e-4, --ensemble 1, --beam-size 1 (the "
        "export serves greedy search)",
        metavar="TEACHER",
    )
    distill_targets: str = _flag(
        "teacher",
        "the student's summaries, one of teacher (the teacher's "
        "headlines), mixed (both them and the references), inter (of the "
        "teacher's n best, the one closest to the reference: Seq-Inter; the "
        "teacher's export needs its n_best signature, which exports have by "
        "default) or inter-mixed (both those and the references)",
        **choices(DISTILL_TARGETS),
    )
    distill_min_overlap: float = _flag(
        0.0,
        "leave out the teacher's headlines whose mean ROUGE-1/2/L F1 "
        "with their reference (0-100) is below this",
        metavar="F1",
    )
    init_from: str | None = _flag(
        None,
        "start from a trained run (runs/<name>) or an export "
        "(saved_models/<name>/<version>): its config and vocabulary, and each "
        "member's weights from its member of the same rank (the model flags "
        "are its own); with --distill-from, the teacher's export",
        metavar="DIR",
    )


@dataclasses.dataclass
class TuningSettings:
    """The decoding settings chosen by ROUGE-1 on validation after training
    (each field's help: its flag's)."""

    tune_decoding: bool = _flag(
        True,
        "choose --length-penalty, --no-repeat-ngram-size and "
        "--greedy-end-penalty by ROUGE-1 on validation examples after training "
        "(--no-tune-decoding keeps the values given)",
    )
    tune_examples: int = _flag(500, "validation examples for --tune-decoding")
    tune_length_penalties: list[float] = _flag(
        [0.6, 1.0, 1.5, 2.0, 2.5, 3.0], "length penalties tried", type=float, nargs="+"
    )
    tune_ngram_sizes: list[int] = _flag(
        [1, 2, 3], "n-gram blocking sizes tried", type=int, nargs="+"
    )
    tune_end_penalties: list[float] = _flag(
        [0.0, 0.5, 1.0, 1.5, 2.0, 3.0],
        "greedy search's end penalties tried (none: keep --greedy-end-penalty)",
        type=float,
        nargs="*",
    )
    greedy_length: str = _flag(
        "rouge",
        "how the end penalty is chosen: rouge (the best validation "
        "ROUGE-1) or teacher (the mean headline length nearest the "
        "--distill-from teacher's on the same validation documents)",
        **choices(GREEDY_LENGTHS),
    )


@dataclasses.dataclass
class EvaluationSettings:
    """The export's scoring (each field's help: its flag's)."""

    eval_split: str = _flag("test", "split to score")
    max_eval_examples: int | None = _flag(None, "score only the first N pairs")
    skip_eval: bool = _flag(False, "export without evaluating", action="store_true")


@dataclasses.dataclass
class TrainSettings:
    """Everything `train.py` runs with.

    Attributes:
        data: Where the data comes from.
        run: The run's name, folders, training pairs and devices.
        distillation: A teacher, and the run a model starts from.
        tuning: The decoding settings chosen on validation.
        evaluation: The export's scoring.
        model: The model's config; its unset (None) lengths and text form
            are chosen from the data when the run starts
            (`models.training.chosen_lengths.settle_config`).
        training: The training options.
        search: The decoding settings baked into the export (before
            tuning); an unset `max_length` is the run's headline length.
        risk: Minimum-risk fine-tuning after training.
        verbose: TensorFlow's start-up and C++ log lines shown.
    """

    data: DataSource = _record(DataSource)
    run: RunSettings = _record(RunSettings)
    distillation: DistillationSettings = _record(DistillationSettings)
    tuning: TuningSettings = _record(TuningSettings)
    evaluation: EvaluationSettings = _record(EvaluationSettings)
    model: SummarizerConfig = _record(SummarizerConfig)
    training: TrainOptions = _record(TrainOptions)
    search: SearchOptions = _record(lambda: SearchOptions(**TRAIN_DEFAULTS["search"]))
    risk: RiskOptions = _record(RiskOptions)
    verbose: bool = verbose_field()

    def __post_init__(self):
        if self.tuning.greedy_length not in GREEDY_LENGTHS:
            raise UserError(
                f"`greedy_length` must be one of {', '.join(GREEDY_LENGTHS)}. "
                f"Received: greedy_length={self.tuning.greedy_length!r}"
            )
        self._check_backend()
        teacher = self.distillation.distill_from
        if self.tuning.greedy_length == "teacher" and not teacher:
            raise UserError(
                "`--greedy-length teacher` keeps a distillation teacher's "
                "length, and needs `--distill-from`. Received: distill_from=None"
            )

    def _check_backend(self):
        """Refuses, on a backend other than TensorFlow, the stages that only
        TensorFlow runs."""
        backend = self.run.backend
        hosts = (self.run.coordinator, self.run.num_processes, self.run.process_id)
        if backend == "tensorflow" and any(v is not None for v in hosts):
            raise UserError(
                "--coordinator, --num-processes and --process-id start a "
                "multi-host run on JAX: add --backend jax, or use "
                "--strategy multi_worker with TF_CONFIG on TensorFlow. "
                f"Received: coordinator={hosts[0]}, num_processes={hosts[1]}, "
                f"process_id={hosts[2]}"
            )
        if backend == "tensorflow":
            return
        if backend == "torch":
            raise UserError(
                "`--backend torch` is not offered: Keras runs the summarizer "
                "eagerly on torch, 0.6 times JAX's examples/s and a validation "
                "search 2.9 times as long (BENCHMARKS.md), and no run on it has "
                "been tested: use --backend jax or tensorflow. "
                "Received: backend='torch'"
            )
        tensorflow_only = {
            "risk_updates": self.risk.risk_updates or None,
            "distill_from": self.distillation.distill_from,
            "init_from": self.distillation.init_from,
            "strategy": None if self.run.strategy == "default" else self.run.strategy,
        }
        given = {k: v for k, v in tensorflow_only.items() if v is not None}
        if given:
            received = ", ".join(f"{k}={v!r}" for k, v in given.items())
            raise UserError(
                f"`--backend {backend}` trains without minimum-risk "
                "fine-tuning, distillation, --init-from and tf.distribute "
                "strategies, which run on TensorFlow only: drop them or use "
                f"--backend tensorflow. Received: backend={backend!r}, {received}"
            )


# The help sections of `train.py --help`, each with the records whose fields
# are its flags: `(title, ((TrainSettings field, record class), ...))`.
FLAG_GROUPS = (
    ("data", (("data", DataSource),)),
    ("model", (("model", SummarizerConfig),)),
    ("training", (("training", TrainOptions), ("run", RunSettings))),
    (
        "minimum-risk fine-tuning (after training: the expected ROUGE cost "
        "of each member's beam n-best headlines)",
        (("risk", RiskOptions),),
    ),
    ("distillation", (("distillation", DistillationSettings),)),
    (
        "decoding (baked into the export)",
        (("search", SearchOptions), ("tuning", TuningSettings)),
    ),
    ("evaluation", (("evaluation", EvaluationSettings),)),
)


def add_train_flags(parser):
    """Adds every flag of `train.py` to `parser`: the records' fields, by
    section (`FLAG_GROUPS`), then `--verbose`."""
    for title, records in FLAG_GROUPS:
        group = parser.add_argument_group(title)
        for name, cls in records:
            add_config_flags(group, cls, defaults=TRAIN_DEFAULTS.get(name))
    add_config_flags(parser, TrainSettings)


def train_settings(args):
    """The `TrainSettings` of the parsed flags `args` (`add_train_flags`)."""
    records = {
        name: cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})
        for _, group in FLAG_GROUPS
        for name, cls in group
    }
    return TrainSettings(**records, verbose=args.verbose)
