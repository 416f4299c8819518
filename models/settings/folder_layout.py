"""The names of the files and folders in a run folder and in an export.

A run folder (`runs/<name>/`, written by `train.py`) holds:

- `config.json`, `vocab.txt`, `train_options.json`: the model's config, its
  vocabulary and the training options;
- `schedule.json`: the training schedule, in examples and validations,
  fixed when the run starts (`models.training.schedule`);
- `model.keras` and `training_end.json`: the trained model and the record of
  how its training ended, written once it has finished;
- `best.weights.h5`: the best weights so far, by the validation score;
- `backup/`: Keras' `BackupAndRestore` folder (its `training_metadata.json`
  holds the validations done, Keras' "epoch", to resume at) with
  `callback_state.json`, the state of the callbacks that resume with it;
- `member-K/`: an ensemble's member K >= 1, laid out like the run itself;
- `risk/`: a member's minimum-risk fine-tuning, with `state.json`,
  `latest.weights.h5`, `best.weights.h5` and the tuned `model.keras`;
- `teacher/`: the headlines of a distillation's teacher, decoded once;
- `training-examples-N/`: a large training split's N encoded examples,
  saved once (a small split's stay in memory);
- `search_tuning.json`: the decoding settings chosen on validation;
- `lengths.json`: the source and headline lengths and the lead baseline's
  words, how each was chosen, and the training lengths they came from;
- `logs/`: TensorBoard's logs.

An export version folder (`saved_models/<name>/<version>/`) holds the
SavedModel (`saved_model.pb`), `search_options.json`, the run's
`config.json`, `vocab.txt`, `lengths.json` and trained models, `training.json`
(what trained it, and how it compares with the lead baseline on validation)
and, once evaluated, `metrics.json` and `heatmaps/`. An ONNX export's version
folder (`--format onnx`) holds `headlines.onnx`, `onnx_model.json` (its
inputs, outputs and text rules), `config.json` and `vocab.txt`.

Plain constants and `pathlib` only: the server imports it without any model
code.
"""

from pathlib import Path

# A run folder, and each ensemble member's folder in it.
CONFIG_FILE = "config.json"
VOCABULARY_FILE = "vocab.txt"
TRAIN_OPTIONS_FILE = "train_options.json"
SCHEDULE_FILE = "schedule.json"
MODEL_FILE = "model.keras"
END_RECORD_FILE = "training_end.json"
BEST_WEIGHTS_FILE = "best.weights.h5"
BACKUP_DIR = "backup"
# In `BACKUP_DIR`: Keras' `BackupAndRestore` record (its name is Keras'),
# and the state of the callbacks that resume with it (`models.training.callbacks`).
BACKUP_METADATA_FILE = "training_metadata.json"
CALLBACK_STATE_FILE = "callback_state.json"
# An ensemble's member K >= 1 lives in `<run>/member-K/`; member 0 is the run.
MEMBER_PREFIX = "member-"
# A member's minimum-risk fine-tuning (`models.training.risk_fine_tuning`).
RISK_DIR = "risk"
RISK_STATE_FILE = "state.json"
LATEST_WEIGHTS_FILE = "latest.weights.h5"
# The distillation teacher's decoded headlines (`models.training.distill`).
TEACHER_CACHE_DIR = "teacher"
# A large training split's encoded examples (`models.data.training_cache`).
TRAINING_CACHE = "training-examples"
# The examples as token-id arrays (`models.data.arrays`), for a training
# process without TensorFlow: `<PREPARED_DIR>/<split>-<examples>/`, each
# holding `ARRAYS_FILE` and one raw file per array.
PREPARED_DIR = "prepared"
ARRAYS_FILE = "arrays.json"
# In `PREPARED_DIR`: which folders the last preparation wrote, and the flags
# that chose their examples (`models.training.array_training`).
PREPARED_MANIFEST_FILE = "prepared.json"
# The decoding settings chosen on validation, and the grid.
SEARCH_TUNING_FILE = "search_tuning.json"
# The lengths chosen from the training data (`models.training.chosen_lengths`).
LENGTHS_FILE = "lengths.json"
# The data it was trained on, copied into its export (`models.settings.data`).
DATA_SOURCE_FILE = "data_source.json"
LOGS_DIR = "logs"

# An export version folder.
SAVED_MODEL_FILE = "saved_model.pb"
SEARCH_OPTIONS_FILE = "search_options.json"
# What trained it (members, schedule, stages, machine); evaluation copies it
# into `METRICS_FILE`.
TRAINING_RECORD_FILE = "training.json"
METRICS_FILE = "metrics.json"
HEATMAPS_DIR = "heatmaps"
# An ONNX export version folder.
ONNX_FILE = "headlines.onnx"
ONNX_CONTRACT_FILE = "onnx_model.json"


def member_dir_name(rank):
    """The folder name of an ensemble's member `rank` >= 1 in its run folder."""
    return f"{MEMBER_PREFIX}{rank}"


def member_rank(name):
    """The rank of the member whose folder is named `name` (`member_dir_name`)."""
    return int(name.removeprefix(MEMBER_PREFIX))


def prepared_arrays_dir(run_dir, split, examples):
    """The prepared arrays of `examples` pairs of `split` in the run folder
    (`models.data.arrays`): named by the count, so that a run with another
    `--max-train-examples` prepares its own."""
    return Path(run_dir) / PREPARED_DIR / f"{split}-{examples}"


def backup_metadata_path(member_dir):
    """Keras' backup record of the member (or run) in `member_dir`."""
    return Path(member_dir) / BACKUP_DIR / BACKUP_METADATA_FILE


def callback_state_path(member_dir):
    """The backed-up callback state of the member (or run) in `member_dir`."""
    return Path(member_dir) / BACKUP_DIR / CALLBACK_STATE_FILE
