"""`train.py`'s settings: its command line, parsed once into typed groups.

`train.py` builds a `TrainSettings` right after parsing; the pipeline
(`models.pipeline.run`) reads its fields and no `argparse.Namespace`. The
flags and their defaults are `train.py`'s: the groups here have no defaults
of their own, so that the parser stays the one place that sets them.

Plain dataclasses with no TensorFlow import, like `models.settings.model`.
"""

import dataclasses
from pathlib import Path

from models.settings.data import DataSource
from models.settings.errors import UserError
from models.settings.fit import TrainOptions
from models.settings.model import SummarizerConfig
from models.settings.risk import RiskOptions
from models.settings.search import SearchOptions


@dataclasses.dataclass
class DataSettings:
    """Where the training data comes from.

    Attributes:
        dataset: The TFDS dataset name.
        data_dir: A local copy of the dataset's source (an `org_data`
            folder, its parent, or `ggw_data.zip`), None to download it.
        tfds_dir: Where TFDS keeps prepared datasets (None: TFDS's own).
        document_key: The feature holding the text.
        summary_key: The feature holding the headline.
        max_train_examples: Use only the first N training pairs (None: all).
    """

    dataset: str
    data_dir: str | None
    tfds_dir: str | None
    document_key: str
    summary_key: str
    max_train_examples: int | None

    def source(self):
        """The `DataSource` these settings name."""
        return DataSource(
            dataset=self.dataset,
            data_dir=self.data_dir,
            tfds_dir=self.tfds_dir,
            document_key=self.document_key,
            summary_key=self.summary_key,
        )


@dataclasses.dataclass
class RunSettings:
    """The run's name, its folders and its devices.

    Attributes:
        name: The model's name.
        run_dir: Checkpoints, logs, vocabulary (None: `runs/<name>`).
        export_dir: SavedModel versions (None: `saved_models/<name>`).
        strategy: The `tf.distribute` strategy: `"default"`, `"mirrored"`
            or `"multi_worker"`.
        cpu_devices: Logical devices the CPU is split into.
    """

    name: str
    run_dir: str | None
    export_dir: str | None
    strategy: str
    cpu_devices: int

    def run_path(self):
        """The run folder: `run_dir`, else `runs/<name>`."""
        return Path(self.run_dir or f"runs/{self.name}")

    def export_path(self):
        """The export's model folder: `export_dir`, else `saved_models/<name>`."""
        return Path(self.export_dir or f"saved_models/{self.name}")


@dataclasses.dataclass
class DistillationSettings:
    """A student's teacher, and the run a model starts from.

    Attributes:
        distill_from: An exported teacher (`saved_models/<name>/<version>`)
            whose headlines the student learns, None: no distillation.
        distill_targets: The student's summaries: `"teacher"`, `"mixed"`,
            `"inter"` or `"inter-mixed"` (`models.training.distill.TARGETS`).
        distill_min_overlap: Teacher headlines whose mean ROUGE F1 with the
            reference (0-100) is below it are left out.
        init_from: A trained run or an export whose config, vocabulary and
            members' weights the run starts from, None: from scratch.
    """

    distill_from: str | None
    distill_targets: str
    distill_min_overlap: float
    init_from: str | None


@dataclasses.dataclass
class TuningSettings:
    """The decoding settings chosen by ROUGE-1 on validation after training.

    Attributes:
        tune_decoding: Whether to choose them (else the values given stay).
        tune_examples: The validation examples they are chosen on.
        tune_length_penalties: The length penalties tried.
        tune_ngram_sizes: The n-gram blocking sizes tried.
        tune_end_penalties: Greedy search's end penalties tried (empty: keep
            the one given).
        greedy_length: How the end penalty is chosen: `"rouge"`, the best
            validation ROUGE-1; `"teacher"`, the headlines' mean length
            nearest the distillation teacher's on the same documents.
    """

    tune_decoding: bool
    tune_examples: int
    tune_length_penalties: list[float]
    tune_ngram_sizes: list[int]
    tune_end_penalties: list[float]
    greedy_length: str


@dataclasses.dataclass
class EvaluationSettings:
    """The export's scoring.

    Attributes:
        eval_split: The split to score.
        max_eval_examples: Score only the first N pairs (None: all).
        skip_eval: Export without evaluating.
    """

    eval_split: str
    max_eval_examples: int | None
    skip_eval: bool


@dataclasses.dataclass
class TrainSettings:
    """Everything `train.py` runs with.

    Attributes:
        data: Where the data comes from.
        run: The run's name, folders and devices.
        distillation: A teacher, and the run a model starts from.
        tuning: The decoding settings chosen on validation.
        evaluation: The export's scoring.
        model: The model's config.
        training: The training options.
        search: The decoding settings baked into the export (before tuning).
        risk: Minimum-risk fine-tuning after training.
        choose_normalization: `--normalization` was not given: the pipeline
            chooses `model.normalization` from the data.
        choose_lengths: The lengths not given on the command line, of
            `max_source_length`, `max_target_length` (the pipeline chooses
            them from the training data, `models.training.chosen_lengths`)
            and `max_length` (the search's: the run's `max_target_length`).
        verbose: TensorFlow's start-up and C++ log lines shown.
    """

    data: DataSettings
    run: RunSettings
    distillation: DistillationSettings
    tuning: TuningSettings
    evaluation: EvaluationSettings
    model: SummarizerConfig
    training: TrainOptions
    search: SearchOptions
    risk: RiskOptions
    choose_normalization: bool
    choose_lengths: tuple[str, ...]
    verbose: bool

    def __post_init__(self):
        if self.tuning.greedy_length not in GREEDY_LENGTHS:
            raise UserError(
                f"`greedy_length` must be one of {', '.join(GREEDY_LENGTHS)}. "
                f"Received: greedy_length={self.tuning.greedy_length!r}"
            )
        teacher = self.distillation.distill_from
        if self.tuning.greedy_length == "teacher" and not teacher:
            raise UserError(
                "`--greedy-length teacher` keeps a distillation teacher's "
                "length, and needs `--distill-from`. Received: distill_from=None"
            )


# How greedy search's end penalty is chosen (`TuningSettings.greedy_length`).
GREEDY_LENGTHS = ("rouge", "teacher")

# The groups whose fields are flags of the same names.
FLAG_GROUPS = {
    "data": DataSettings,
    "run": RunSettings,
    "distillation": DistillationSettings,
    "tuning": TuningSettings,
    "evaluation": EvaluationSettings,
}
