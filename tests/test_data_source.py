"""The training data's source (`DataSource`) from the command line to the
export, and from the export to its evaluation: a dataset whose features
have other names than `document` and `summary` is scored on those."""

import pytest

pytestmark = pytest.mark.tf_only

import json  # noqa: E402
import os  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
from fake_servable import save_fake  # noqa: E402

import train  # noqa: E402
from models import data  # noqa: E402
from models.evaluation import evaluate  # noqa: E402
from models.model.run_folder import export_files  # noqa: E402
from models.settings.data import DataSource  # noqa: E402
from models.settings.folder_layout import (  # noqa: E402
    CONFIG_FILE,
    DATA_SOURCE_FILE,
    VOCABULARY_FILE,
)

NEWS = DataSource(
    dataset="news", data_dir="/data/news", document_key="article", summary_key="title"
)


def recording_load_split(calls):
    """A `models.data.load_split` that records its arguments and returns one
    pair the fake export's headline matches word for word."""

    def load_split(split, source):
        calls.append((split, source))
        pairs = (["one two three four"], ["one two three"])
        return tf.data.Dataset.from_tensor_slices(pairs)

    return load_split


def test_a_record_reads_back_as_written(tmp_path):
    NEWS.write(tmp_path)
    assert json.loads((tmp_path / DATA_SOURCE_FILE).read_text()) == {
        "dataset": "news",
        "data_dir": "/data/news",
        "tfds_dir": None,
        "document_key": "article",
        "summary_key": "title",
    }
    assert DataSource.recorded(tmp_path) == NEWS


def test_a_folder_without_a_record_has_the_default_source(tmp_path):
    assert DataSource.recorded(tmp_path) == DataSource()
    assert (DataSource().document_key, DataSource().summary_key) == (
        "document",
        "summary",
    )


def test_the_command_line_names_its_source():
    settings = train.parse_settings(
        [
            "--dataset=news",
            "--data-dir=/data/news",
            "--document-key=article",
            "--summary-key=title",
            "--max-train-examples=10",
        ]
    )
    assert settings.data == NEWS
    assert settings.run.max_train_examples == 10


def test_a_run_folder_hands_its_source_to_the_export(tmp_path):
    for name in (CONFIG_FILE, VOCABULARY_FILE):
        (tmp_path / name).write_text("{}")
    assert DATA_SOURCE_FILE not in export_files(tmp_path)
    NEWS.write(tmp_path)
    assert export_files(tmp_path)[DATA_SOURCE_FILE] == (tmp_path / DATA_SOURCE_FILE)


def test_the_feature_names_of_the_training_data_reach_evaluation(tmp_path, monkeypatch):
    version = tmp_path / "news" / "1"
    save_fake(version, upper=True)
    NEWS.write(version)
    calls = []
    monkeypatch.setattr(data, "load_split", recording_load_split(calls))
    metrics = evaluate.evaluate(
        version,
        split="validation",
        n_heatmaps=0,
        n_bootstrap=10,
        progress=False,
        readable=True,
    )
    assert calls == [("validation", NEWS)]
    assert metrics["systems"]["beam"]["rouge1"]["f1"] == pytest.approx(100.0)


def test_the_command_line_reads_the_folders_given_with_the_recorded_names(tmp_path):
    version = tmp_path / "news" / "1"
    save_fake(version, upper=True)
    NEWS.write(version)
    settings = evaluate.parse_evaluate_settings(
        ["--model-dir", str(tmp_path / "news"), "--data-dir", "/elsewhere"]
    )
    assert settings.source() == DataSource(
        data_dir="/elsewhere", document_key="article", summary_key="title"
    )
