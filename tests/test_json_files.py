"""`models.settings.json_files`: a record written whole or not at all."""

import json
import os

import numpy as np
import pytest

from models.settings.json_files import (
    read_json,
    whole_file,
    write_json,
    write_whole,
)


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


def test_an_interrupted_rename_keeps_the_previous_file(tmp_path, monkeypatch):
    path = tmp_path / "search_tuning.json"
    write_json(path, {"chosen": 1})

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_json(path, {"chosen": 2})
    assert read_json(path) == {"chosen": 1}
    assert os.listdir(tmp_path) == ["search_tuning.json"]


def test_a_writer_failing_midway_leaves_no_partial_file(tmp_path):
    path = tmp_path / "lengths.npy"
    with whole_file(path) as partial:
        np.save(partial, np.arange(3))
    with pytest.raises(OSError, match="disk full"):
        with whole_file(path) as partial:
            partial.write_bytes(b"\x93NUMPY half a header")
            raise OSError("disk full")
    np.testing.assert_array_equal(np.load(path), [0, 1, 2])
    assert os.listdir(tmp_path) == ["lengths.npy"]


def test_the_temporary_file_keeps_the_suffix_and_the_umask(tmp_path):
    seen = []
    previous = os.umask(0o022)
    try:
        with whole_file(tmp_path / "model.keras") as partial:
            seen.append(partial)
            partial.write_text("zip")
        write_whole(tmp_path / "vocab.txt", "a\n")
    finally:
        os.umask(previous)
    assert seen[0].parent == tmp_path and seen[0].suffix == ".keras"
    assert seen[0].name.startswith(".model.")
    # Readable by others, as a file written in place would be (not mkstemp's 0600).
    assert (tmp_path / "vocab.txt").stat().st_mode & 0o777 == 0o644
    assert sorted(os.listdir(tmp_path)) == ["model.keras", "vocab.txt"]
