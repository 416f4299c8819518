"""A run's config resolved once (`models.training.chosen_lengths.settle_config`):
the choices left unset (None) taken from the data, and a run folder's
recorded config kept whatever the command line and the data say."""

import pytest

pytestmark = pytest.mark.tf_only

import json  # noqa: E402

import tensorflow as tf  # noqa: E402

from models.settings.data import DataSource  # noqa: E402
from models.settings.model import SummarizerConfig  # noqa: E402
from models.settings.search import SearchOptions  # noqa: E402
from models.training.chosen_lengths import settle_config  # noqa: E402

GIGAWORD_TEXT = ("japan 's nec corp. said it would cut #,### jobs", "nec cuts jobs")
WRITTEN_TEXT = ("Japan's NEC Corp. said it would cut 2,500 jobs", "NEC cuts jobs")
# A config.json as a run folder holds it: every field, the lengths settled.
RECORDED = {
    **SummarizerConfig(
        max_source_length=24, max_target_length=12, normalization="general"
    ).to_dict(),
    "vocab_size": 57,
}


def _split(pair, n=5):
    return tf.data.Dataset.from_tensor_slices(([pair[0]] * n, [pair[1]] * n))


def test_unset_means_choose_from_the_data():
    config = SummarizerConfig()
    assert (config.max_source_length, config.max_target_length) == (None, None)
    assert config.normalization is None
    assert config.unsettled() == (
        "max_source_length",
        "max_target_length",
        "normalization",
    )
    assert (
        SummarizerConfig(
            max_source_length=8, max_target_length=4, normalization="general"
        ).unsettled()
        == ()
    )


def test_a_new_run_chooses_what_is_unset(tmp_path, capsys):
    source = DataSource(data_dir=str(tmp_path / "org_data"))
    config, search = settle_config(
        tmp_path / "run",
        _split(GIGAWORD_TEXT),
        source,
        SummarizerConfig(),
        SearchOptions(max_length=None),
    )
    # 11 source tokens: 13.75, to the floor 16; 3 + </s>: to the floor 8.
    assert (config.max_source_length, config.max_target_length) == (16, 8)
    assert config.normalization == "gigaword"  # Gigaword's own text
    assert search.max_length == 8  # the run's headline length
    assert config.unsettled() == ()
    assert capsys.readouterr().err.startswith("Lengths: source 16 tokens")
    recorded = json.loads((tmp_path / "run" / "lengths.json").read_text())
    assert recorded["chosen"] == {
        "max_source_length": "data",
        "max_target_length": "data",
    }


def test_written_text_and_other_datasets_get_the_general_form(tmp_path):
    local = DataSource(data_dir=str(tmp_path))
    config, _ = settle_config(
        tmp_path / "a", _split(WRITTEN_TEXT), local, SummarizerConfig(), SearchOptions()
    )
    assert config.normalization == "general"
    other = DataSource(dataset="news", data_dir=str(tmp_path))
    config, _ = settle_config(
        tmp_path / "b",
        _split(GIGAWORD_TEXT),
        other,
        SummarizerConfig(),
        SearchOptions(),
    )
    assert config.normalization == "general"
    # TFDS's download of Gigaword: its own text, without a look.
    config, _ = settle_config(
        tmp_path / "c",
        _split(WRITTEN_TEXT),
        DataSource(),
        SummarizerConfig(),
        SearchOptions(),
    )
    assert config.normalization == "gigaword"


def test_given_values_are_kept(tmp_path):
    config, search = settle_config(
        tmp_path / "run",
        _split(GIGAWORD_TEXT),
        DataSource(),
        SummarizerConfig(max_target_length=6, normalization="general"),
        SearchOptions(max_length=9),
    )
    assert (config.max_source_length, config.max_target_length) == (16, 6)
    assert config.normalization == "general"
    assert search.max_length == 9
    recorded = json.loads((tmp_path / "run" / "lengths.json").read_text())
    assert recorded["chosen"]["max_target_length"] == "given"


def test_a_run_folder_resumes_with_its_recorded_values(tmp_path, capsys):
    run_dir = tmp_path / "run"
    first, _ = settle_config(
        run_dir, _split(WRITTEN_TEXT), DataSource(), SummarizerConfig(), SearchOptions()
    )
    (run_dir / "config.json").write_text(json.dumps(RECORDED))
    capsys.readouterr()
    # Longer data and other flags: the run's own config wins.
    longer = _split((" ".join(["w"] * 300), " ".join(["w"] * 50)))
    config, search = settle_config(
        run_dir,
        longer,
        DataSource(dataset="news"),
        SummarizerConfig(max_source_length=100),
        SearchOptions(max_length=None),
    )
    assert config == SummarizerConfig.from_dict(RECORDED)
    assert (config.max_source_length, config.max_target_length) == (24, 12)
    assert config.normalization == "general"
    assert search.max_length == 12
    assert "(kept from the run)" in capsys.readouterr().err
    assert first.max_source_length == 16


def test_a_config_from_before_normalization_reads_as_gigaword(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    old = {k: v for k, v in RECORDED.items() if k != "normalization"}
    (run_dir / "config.json").write_text(json.dumps(old))
    config, _ = settle_config(
        run_dir, _split(WRITTEN_TEXT), DataSource(), SummarizerConfig(), SearchOptions()
    )
    assert config.normalization == "gigaword"
    assert (config.max_source_length, config.max_target_length) == (24, 12)


def test_a_run_started_from_another_keeps_its_lengths(tmp_path):
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "config.json").write_text(json.dumps(RECORDED))
    config, search = settle_config(
        tmp_path / "run",
        _split(GIGAWORD_TEXT),
        DataSource(),
        SummarizerConfig(),
        SearchOptions(max_length=None),
        init_from=parent,
    )
    assert (config.max_source_length, config.max_target_length) == (24, 12)
    assert search.max_length == 12
    recorded = json.loads((tmp_path / "run" / "lengths.json").read_text())
    assert set(recorded["chosen"].values()) == {f"kept from {parent}/config.json"}
