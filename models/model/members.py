"""An ensemble's members in a run folder: where each lives, whether it
has finished, and whether it is served.

Whether a member has finished is the schedule's to say
(`models.training.schedule.Schedule.finished`: early stopping ended it, or it trained
its example limit). Training then writes `model.keras` and the record
`training_end.json` beside it, never before; a member that a cap, a kill or
a crash cut has neither, and the same command resumes it from its backup.
A folder that holds `model.keras` and no backup (an export's, which
`--init-from` reads) is taken as it is. `served` is the one rule of which
members are served: finished ones, whose minimum-risk stage, if one began,
has finished too; a command decides it from what it trained, a folder from
its files (`is_served`), and `training.json` records it under `served`.
"""

import dataclasses
from pathlib import Path

from models.settings.folder_layout import (
    BACKUP_DIR,
    END_RECORD_FILE,
    MODEL_FILE,
    RISK_DIR,
    RISK_STATE_FILE,
    member_dir_name,
)
from models.settings.json_files import read_json, write_json

# A member's line of `training.json` says whether it is served under this
# key; a line without it says so under `finished`.
SERVED_KEY = "served"
FINISHED_KEY = "finished"


def member_dirs(run_dir, count):
    """The folders of an ensemble's members: the run's own, then `member-K`."""
    run_dir = Path(run_dir)
    return [run_dir] + [run_dir / member_dir_name(k) for k in range(1, count)]


@dataclasses.dataclass
class MemberEnd:
    """The record of a finished member (`training_end.json`).

    Attributes:
        validations: Validations it ran.
        examples: Training examples it trained on (in full batches).
        reason: `"early_stopping"` or `"example_limit"`.
        best: Its best validation score (`monitor`), None if unknown.
        best_validation: That score's validation, counted from 1.
        best_examples: The examples trained at that validation.
        monitor: `"val_rouge1"` or `"val_loss"`.
        backend: The Keras backend it trained on (`train.py --backend`);
            a record without one was trained on TensorFlow.
    """

    validations: int
    examples: int
    reason: str
    best: float | None = None
    best_validation: int | None = None
    best_examples: int | None = None
    monitor: str = "val_rouge1"
    backend: str = "tensorflow"


def write_end(member_dir, end):
    """Writes `end` (a `MemberEnd`) as the member's record."""
    write_json(Path(member_dir) / END_RECORD_FILE, dataclasses.asdict(end))


def read_end(member_dir):
    """The member's `MemberEnd`, or None if it has no record."""
    values = read_json(Path(member_dir) / END_RECORD_FILE)
    return None if values is None else MemberEnd(**values)


def served(trained, risk_finished=None):
    """Whether a member is served: its training has finished (`trained`),
    and so has its minimum-risk stage (`risk_finished`; None: no stage
    began on it).

    Example:

    >>> served(True), served(True, risk_finished=False), served(False)
    (True, False, False)
    """
    return bool(trained) and (risk_finished is None or bool(risk_finished))


def is_served(member_dir):
    """Whether the member in `member_dir` is served (`served`), from its
    files: it has finished (its record), or it is a trained model with no
    backup (an export's); a minimum-risk stage began where it has a state,
    and finished where it wrote its model."""
    member_dir = Path(member_dir)
    if not (member_dir / MODEL_FILE).is_file():
        return False
    # The record's presence, not its fields: a run trained in epochs wrote
    # others, and its exports are read still.
    recorded = (member_dir / END_RECORD_FILE).is_file()
    trained = recorded or not (member_dir / BACKUP_DIR).exists()
    risk = member_dir / RISK_DIR
    began = (risk / RISK_STATE_FILE).is_file()
    return served(trained, (risk / MODEL_FILE).is_file() if began else None)


def served_in_record(line):
    """Whether a member's line of `training.json` (`members`) says it was
    served: its `served`, or its `finished` where it has no `served`.

    Example:

    >>> served_in_record({"member": 1, "served": True})
    True
    >>> served_in_record({"member": 2, "finished": False})
    False
    """
    return bool(line[SERVED_KEY] if SERVED_KEY in line else line[FINISHED_KEY])
