"""Whether an ensemble's member has finished: its record, and the rule for
run folders written before members recorded their end."""

import pytest

pytestmark = pytest.mark.tf_only

import json  # noqa: E402

from models import members  # noqa: E402
from models.members import MemberEnd  # noqa: E402


def _member(folder, backup_epoch=None, stopped_epoch=None, saved=True):
    folder.mkdir(parents=True, exist_ok=True)
    if saved:
        (folder / "model.keras").write_bytes(b"weights")
    if backup_epoch is not None:
        (folder / "backup").mkdir()
        metadata = {"epoch": backup_epoch, "batch": 0}
        (folder / "backup" / "training_metadata.json").write_text(json.dumps(metadata))
        state = {"EarlyStopping": {"stopped_epoch": stopped_epoch or 0, "wait": 0}}
        (folder / "backup" / "callback_state.json").write_text(json.dumps(state))
    return folder


def test_a_record_says_how_the_member_ended(tmp_path):
    folder = _member(tmp_path / "m")
    end = MemberEnd(epochs=7, reason="early_stopping", best=41.3, best_epoch=2)
    members.write_end(folder, end)
    assert members.finished_end(folder, max_epochs=60) == (end, None)


@pytest.mark.parametrize(
    "backup_epoch, stopped_epoch, reason, note",
    [
        (16, 15, "early_stopping", "early stopping after 16 epochs: taken as finished"),
        (60, None, "epoch_limit", "epoch limit after 60 epochs: taken as finished"),
        (3, None, None, "cut after 3 of at most 60 epochs: resuming it"),
        (None, None, "unknown", "no backup: taken as finished"),
    ],
)
def test_an_older_member_is_judged_by_its_backup(
    tmp_path, backup_epoch, stopped_epoch, reason, note
):
    folder = _member(tmp_path / "m", backup_epoch, stopped_epoch)
    end, line = members.finished_end(folder, max_epochs=60)
    assert (end and end.reason) == reason
    assert line.startswith(f"{folder}: model.keras has no record")
    assert line.endswith(note)
    assert "\n" not in line


def test_a_member_never_saved_has_not_finished(tmp_path):
    folder = _member(tmp_path / "m", backup_epoch=2, saved=False)
    assert members.finished_end(folder, max_epochs=60) == (None, None)


def test_model_files_leave_out_unfinished_members(tmp_path):
    from models.run_folder import model_files

    run = _member(tmp_path / "run")
    members.write_end(run, MemberEnd(epochs=4, reason="epoch_limit"))
    (run / "train_options.json").write_text(json.dumps({"epochs": 4}))
    _member(run / "member-1", backup_epoch=2)  # cut by a cap: resumed later
    finished = _member(run / "member-2", backup_epoch=4)  # reached its limit
    assert model_files(run) == {
        "model.keras": run / "model.keras",
        "member-2.keras": finished / "model.keras",
    }
