"""An ensemble's members in a run folder: where each lives, and whether it
has finished.

A member has finished when early stopping ended it or it trained its epoch
limit (`TrainOptions.epochs`). Training writes `model.keras` and the record
`training_end.json` beside it when a member finishes, never before; only
finished members are exported. A member that a cap, a kill or a crash cut is
resumed from its backup by the same command.

Run folders written before members recorded their end hold `model.keras`
with no record. The rule for them: the member's backup tells how it ended.
If early stopping had ended it, or it had trained its epoch limit, it has
finished (and its record is written); otherwise a cap had cut it, and it is
resumed from its backup like any unfinished member. A member with no backup
either is taken as it is.
"""

import dataclasses
import json
from pathlib import Path

from models.folder_layout import (
    END_RECORD_FILE,
    MODEL_FILE,
    TRAIN_OPTIONS_FILE,
    backup_metadata_path,
    callback_state_path,
    member_dir_name,
)


def member_dirs(run_dir, count):
    """The folders of an ensemble's members: the run's own, then `member-K`."""
    run_dir = Path(run_dir)
    return [run_dir] + [run_dir / member_dir_name(k) for k in range(1, count)]


@dataclasses.dataclass
class MemberEnd:
    """The record of a finished member (`training_end.json`).

    Attributes:
        epochs: Epochs it trained.
        reason: `"early_stopping"` or `"epoch_limit"`.
        best: Its best validation score (`monitor`), None if unknown.
        best_epoch: That score's epoch, counted from 1.
        monitor: `"val_rouge1"` or `"val_loss"`.
    """

    epochs: int
    reason: str
    best: float | None = None
    best_epoch: int | None = None
    monitor: str = "val_rouge1"


def write_end(member_dir, end):
    """Writes `end` (a `MemberEnd`) as the member's record."""
    path = Path(member_dir) / END_RECORD_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dataclasses.asdict(end), indent=2) + "\n")
    tmp.replace(path)


def read_end(member_dir):
    """The member's `MemberEnd`, or None if it has no record."""
    path = Path(member_dir) / END_RECORD_FILE
    if not path.is_file():
        return None
    return MemberEnd(**json.loads(path.read_text()))


def _read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def infer_end(member_dir, max_epochs):
    """The rule for a member saved before members recorded their end.

    Returns:
        `(end, note)`: `end` is a `MemberEnd` if the member had finished,
        else None (it is to be resumed); `note` is one line that says which.
    """
    member_dir = Path(member_dir)
    metadata = _read_json(backup_metadata_path(member_dir))
    if metadata is None:
        return (
            MemberEnd(epochs=0, reason="unknown"),
            f"{member_dir}: {MODEL_FILE} has no record of its training's end "
            "and no backup: taken as finished",
        )
    epochs = int(metadata.get("epoch", 0))
    stopping = (_read_json(callback_state_path(member_dir)) or {}).get(
        "EarlyStopping", {}
    )
    if stopping.get("stopped_epoch") or epochs >= max_epochs:
        reason = "early_stopping" if stopping.get("stopped_epoch") else "epoch_limit"
        return (
            MemberEnd(epochs=epochs, reason=reason),
            f"{member_dir}: {MODEL_FILE} has no record of its training's end; "
            f"its backup shows {reason.replace('_', ' ')} after {epochs} epochs: "
            "taken as finished",
        )
    return (
        None,
        f"{member_dir}: {MODEL_FILE} has no record of its training's end; its "
        f"backup shows it was cut after {epochs} of at most {max_epochs} epochs: "
        "resuming it",
    )


def run_max_epochs(run_dir, default):
    """The epoch limit the run was started with (`train_options.json`)."""
    options = _read_json(Path(run_dir) / TRAIN_OPTIONS_FILE) or {}
    return int(options.get("epochs", default))


def finished_end(member_dir, max_epochs):
    """`(MemberEnd or None, note or None)`: whether the member in
    `member_dir` has finished, by its record or, for an older run, by the
    rule above (`note` then says what was decided)."""
    member_dir = Path(member_dir)
    end = read_end(member_dir)
    if end is not None:
        return end, None
    if not (member_dir / MODEL_FILE).is_file():
        return None, None
    return infer_end(member_dir, max_epochs)
