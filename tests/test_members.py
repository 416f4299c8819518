"""Whether an ensemble's member has finished and is served: its record,
an export's model, and a minimum-risk stage cut before its end."""

import pytest

pytestmark = pytest.mark.tf_only

import json  # noqa: E402

from models.model import members  # noqa: E402
from models.model.members import MemberEnd  # noqa: E402


def _member(folder, backup_validations=None, saved=True):
    folder.mkdir(parents=True, exist_ok=True)
    if saved:
        (folder / "model.keras").write_bytes(b"weights")
    if backup_validations is not None:
        (folder / "backup").mkdir()
        metadata = {"epoch": backup_validations, "batch": 0}
        (folder / "backup" / "training_metadata.json").write_text(json.dumps(metadata))
    return folder


def test_a_record_says_how_the_member_ended(tmp_path):
    folder = _member(tmp_path / "m", backup_validations=7)
    assert members.read_end(folder) is None
    assert not members.is_served(folder)
    end = MemberEnd(
        validations=7,
        examples=7 * 26_240,
        reason="early_stopping",
        best=41.3,
        best_validation=2,
        best_examples=2 * 26_240,
    )
    members.write_end(folder, end)
    assert members.read_end(folder) == end
    assert members.is_served(folder)


def test_a_model_without_a_backup_is_taken_as_it_is(tmp_path):
    # An export's folder: a model, no backup, no record.
    assert members.is_served(_member(tmp_path / "export"))
    assert not members.is_served(_member(tmp_path / "never", 2, saved=False))


def test_a_cut_minimum_risk_stage_keeps_the_member_from_being_served(tmp_path):
    folder = _member(tmp_path / "m", backup_validations=3)
    members.write_end(folder, MemberEnd(validations=3, examples=24, reason="x"))
    (folder / "risk").mkdir()
    (folder / "risk" / "state.json").write_text("{}")
    assert not members.is_served(folder)
    (folder / "risk" / "model.keras").write_bytes(b"tuned")
    assert members.is_served(folder)


def test_model_files_leave_out_unfinished_members(tmp_path):
    from models.model.run_folder import model_files

    run = _member(tmp_path / "run", backup_validations=4)
    members.write_end(run, MemberEnd(validations=4, examples=32, reason="x"))
    _member(run / "member-1", backup_validations=2)  # cut by a cap: resumed later
    finished = _member(run / "member-2", backup_validations=4)
    members.write_end(finished, MemberEnd(validations=4, examples=32, reason="x"))
    assert model_files(run) == {
        "model.keras": run / "model.keras",
        "member-2.keras": finished / "model.keras",
    }


def test_model_files_of_an_export_are_its_members_side_by_side(tmp_path):
    from models.model.run_folder import initial_model_files, model_files

    export = _member(tmp_path / "export")  # model.keras, no backup
    for rank in (10, 2, 1):  # ranks, not names, order them
        (export / f"member-{rank}.keras").write_bytes(b"member")
    # Without its SavedModel, a folder is read as a run folder.
    assert list(model_files(export)) == ["model.keras"]
    (export / "saved_model.pb").write_bytes(b"graph")
    assert list(model_files(export)) == [
        "model.keras",
        "member-1.keras",
        "member-2.keras",
        "member-10.keras",
    ]
    assert model_files(export, members=2) == {
        "model.keras": export / "model.keras",
        "member-1.keras": export / "member-1.keras",
    }
    for name in ("config.json", "vocab.txt"):
        (export / name).write_text("x")
    # An export's members each start a member of the same rank.
    assert initial_model_files(export, 3) == {
        0: export / "model.keras",
        1: export / "member-1.keras",
        2: export / "member-2.keras",
    }


@pytest.mark.parametrize(
    "training_finished, risk_finished, expected",
    [
        (True, None, True),  # no minimum-risk stage
        (True, True, True),
        (True, False, False),  # the stage was cut
        (False, None, False),
        (False, True, False),
    ],
)
def test_one_rule_says_which_members_are_served(
    training_finished, risk_finished, expected
):
    assert members.served(training_finished, risk_finished) is expected


def test_a_command_serves_by_the_same_rule_and_records_served(tmp_path):
    from models.pipeline import MemberOutcome
    from models.settings.fit import TrainOptions
    from models.training.schedule import Schedule

    schedule = Schedule.make(TrainOptions(batch_size=8, validate_every=24), 5)
    cut = MemberOutcome(
        0, tmp_path, 2, model=object(), minimum_risk={"finished": False}
    )
    line = cut.record(schedule)
    assert not cut.served and line["served"] is False and "finished" not in line
    assert line["minimum_risk"] == {"finished": False}
    done = MemberOutcome(1, tmp_path, 2, model=object())
    assert done.record(schedule)["served"] is True
    assert done.record(schedule)["examples"] == 2 * 3 * 8
    assert MemberOutcome(2, tmp_path, 1).record(schedule)["served"] is False


def test_a_training_record_written_before_says_served_as_finished(tmp_path):
    # `training.json` as runs wrote it before its key was `served`.
    old = {
        "members": [{"member": 1, "finished": True}, {"member": 2, "finished": False}]
    }
    (tmp_path / "training.json").write_text(json.dumps(old))
    record = json.loads((tmp_path / "training.json").read_text())
    assert [members.served_in_record(m) for m in record["members"]] == [True, False]
    new = [{"member": 1, "served": False, "finished": True}]
    assert [members.served_in_record(m) for m in new] == [False]
