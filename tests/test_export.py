"""`models.export.saved_model.export` is atomic on failure too: it leaves no version
folder and no temporary folder, and removes those a killed export left.

A trivial module stands in for `HeadlineModule`, so that each export takes
well under a second; the folder handling under test is the same.
"""

import pytest

pytestmark = pytest.mark.tf_only

import os  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import tensorflow as tf  # noqa: E402

from models.decoding import headline_module as inference  # noqa: E402
from models.export import saved_model as export_lib  # noqa: E402
from models.settings import version_folders  # noqa: E402

_DOCUMENTS = tf.TensorSpec([None], tf.string)


class _EchoModule(tf.Module):
    """Same signatures as `HeadlineModule`: the headline is the document."""

    def __init__(self, model, features, options, frozen=False):
        super().__init__()

    @tf.function(input_signature=[_DOCUMENTS])
    def beam(self, documents):
        return {"headlines": documents, "scores": tf.zeros(tf.shape(documents))}

    greedy = beam
    attention = beam

    def signatures(self):
        fn = self.beam.get_concrete_function()
        return {"serving_default": fn, "greedy": fn, "attention": fn}


@pytest.fixture(autouse=True)
def echo_module(monkeypatch):
    # `export` reads it from `models.decoding.headline_module` when it runs.
    monkeypatch.setattr(inference, "HeadlineModule", _EchoModule)


def run_export(export_dir, **kwargs):
    return export_lib.export(None, None, export_dir, **kwargs)


def test_export_writes_a_loadable_version_and_no_temporary(tmp_path):
    version = run_export(tmp_path, extra_files={"config.json": "{}"})
    assert version == tmp_path / "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]
    assert (version / "config.json").read_text() == "{}"
    out = tf.saved_model.load(str(version)).signatures["greedy"](
        documents=tf.constant(["a b"])
    )
    assert out["headlines"].numpy().tolist() == [b"a b"]


def _fail_saving(monkeypatch):
    def save(module, path, signatures=None):
        Path(path, "saved_model.pb").write_bytes(b"half")  # a half-written save
        raise OSError("disk full")

    monkeypatch.setattr(tf.saved_model, "save", save)
    return OSError, None


def _fail_renaming(monkeypatch):
    def replace(src, dst):
        raise KeyboardInterrupt  # Ctrl-C at the last moment

    # The version folder is renamed into place where its rules live.
    monkeypatch.setattr(version_folders.os, "replace", replace)
    return KeyboardInterrupt, None


def _fail_copying(monkeypatch):
    # An extra file that is missing: the SavedModel is written by then.
    return FileNotFoundError, {"model.keras": Path("/no/such/model.keras")}


@pytest.mark.parametrize(
    "fail", [_fail_saving, _fail_copying, _fail_renaming], ids=lambda f: f.__name__
)
def test_a_failed_export_leaves_nothing(tmp_path, monkeypatch, fail):
    run_export(tmp_path)  # version 1 exists already
    error, extra = fail(monkeypatch)
    with pytest.raises(error):
        run_export(tmp_path, extra_files=extra)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]


def test_a_later_export_removes_stale_temporaries_only(tmp_path):
    # What `kill -9` mid-export leaves: a temporary folder, never renamed.
    stale = tmp_path / ".tmp-export-killed"
    (stale / "variables").mkdir(parents=True)
    two_hours_ago = time.time() - 2 * 3600
    os.utime(stale, (two_hours_ago, two_hours_ago))
    # One a concurrent export is writing right now.
    running = tmp_path / ".tmp-export-running"
    running.mkdir()
    # Not ours, however old: left alone.
    other = tmp_path / ".tmp-other"
    other.mkdir()
    os.utime(other, (two_hours_ago, two_hours_ago))

    assert run_export(tmp_path) == tmp_path / "1"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".tmp-export-running",
        ".tmp-other",
        "1",
    ]
