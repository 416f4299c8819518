"""A run folder's vocabulary (`models.model.run_folder`): written whole or
not at all, like the folder's JSON records."""

import pytest

pytestmark = pytest.mark.tf_only

import os  # noqa: E402

from models.model.run_folder import load_vocabulary, save_vocabulary  # noqa: E402


def test_a_vocabulary_reads_back_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "vocab.txt"
    save_vocabulary(["<pad>", "nec", "cuts"], path)
    assert path.read_text(encoding="utf-8") == "<pad>\nnec\ncuts\n"
    assert load_vocabulary(path) == ["<pad>", "nec", "cuts"]
    assert os.listdir(tmp_path) == ["vocab.txt"]


def test_a_failed_write_keeps_the_previous_vocabulary(tmp_path):
    path = tmp_path / "vocab.txt"
    save_vocabulary(["<pad>", "nec"], path)
    # A lone surrogate has no UTF-8: the write fails after the file is open.
    with pytest.raises(UnicodeEncodeError):
        save_vocabulary(["<pad>", "jobs", "\ud800"], path)
    assert load_vocabulary(path) == ["<pad>", "nec"]
    assert os.listdir(tmp_path) == ["vocab.txt"]
