"""An ensemble's members in a run folder: where each lives, and whether it
has finished.

Whether a member has finished is the schedule's to say
(`models.training.schedule.Schedule.finished`: early stopping ended it, or it trained
its example limit). Training then writes `model.keras` and the record
`training_end.json` beside it, never before; a member that a cap, a kill or
a crash cut has neither, and the same command resumes it from its backup.
Only finished members are served. A folder that holds `model.keras` and no
backup (an export's, which `--init-from` reads) is taken as it is.
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
    """

    validations: int
    examples: int
    reason: str
    best: float | None = None
    best_validation: int | None = None
    best_examples: int | None = None
    monitor: str = "val_rouge1"


def write_end(member_dir, end):
    """Writes `end` (a `MemberEnd`) as the member's record."""
    write_json(Path(member_dir) / END_RECORD_FILE, dataclasses.asdict(end))


def read_end(member_dir):
    """The member's `MemberEnd`, or None if it has no record."""
    values = read_json(Path(member_dir) / END_RECORD_FILE)
    return None if values is None else MemberEnd(**values)


def is_served(member_dir):
    """Whether the member in `member_dir` is one to serve: it has finished
    (its record), or it is a trained model with no backup (an export's);
    and a minimum-risk stage begun on it has finished too."""
    member_dir = Path(member_dir)
    if not (member_dir / MODEL_FILE).is_file():
        return False
    # The record's presence, not its fields: a run trained in epochs wrote
    # others, and its exports are read still.
    recorded = (member_dir / END_RECORD_FILE).is_file()
    trained = recorded or not (member_dir / BACKUP_DIR).exists()
    risk = member_dir / RISK_DIR
    risk_cut = (risk / RISK_STATE_FILE).is_file() and not (risk / MODEL_FILE).is_file()
    return trained and not risk_cut
