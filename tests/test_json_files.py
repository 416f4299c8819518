"""`models.settings.json_files`: a record written whole or not at all."""

import json
import os

import pytest

from models.settings.json_files import read_json, write_json, write_whole


def test_a_record_reads_back_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "run" / "state.json"
    write_json(path, {"step": 3, "best": [1, 2]})
    assert path.read_text() == '{\n  "step": 3,\n  "best": [\n    1,\n    2\n  ]\n}\n'
    assert read_json(path) == {"step": 3, "best": [1, 2]}
    assert os.listdir(path.parent) == ["state.json"]


def test_a_failed_write_keeps_the_previous_record(tmp_path):
    path = tmp_path / "state.json"
    write_json(path, {"step": 3})
    with pytest.raises(TypeError):
        write_json(path, {"step": object()})
    assert json.loads(path.read_text()) == {"step": 3}
    assert os.listdir(tmp_path) == ["state.json"]


def test_one_line_records_and_text(tmp_path):
    write_json(tmp_path / "a.json", {"k": 1}, indent=None)
    assert (tmp_path / "a.json").read_text() == '{"k": 1}\n'
    write_whole(tmp_path / "b.txt", "one\ntwo\n")
    assert (tmp_path / "b.txt").read_text() == "one\ntwo\n"


def test_a_missing_record_is_the_default(tmp_path):
    assert read_json(tmp_path / "none.json") is None
    assert read_json(tmp_path / "none.json", default={}) == {}
