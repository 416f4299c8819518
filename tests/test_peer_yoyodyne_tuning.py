"""benchmarks.peer_yoyodyne_tuning's parts that run without yoyodyne."""

import json

import pytest

from benchmarks import peer_yoyodyne_tuning as tuning


def test_grid_is_the_shared_dropout_by_vocabulary():
    points = tuning.grid_points()
    assert list(points) == [
        "dropout0.0-vocab50k",
        "dropout0.0-vocab10k",
        "dropout0.3-vocab50k",
        "dropout0.3-vocab10k",
    ]
    assert points["dropout0.3-vocab10k"] == {"dropout": 0.3, "vocabulary": (10_000, 2)}
    extras = tuning.extra_points("dropout0.3-vocab10k", points["dropout0.3-vocab10k"])
    assert extras == {
        "dropout0.3-vocab10k-average": {
            **points["dropout0.3-vocab10k"],
            "ema_decay": 0.999,
        }
    }


def test_run_config_checkpoints_every_n_steps_with_the_points_options(tmp_path):
    options = {"dropout": 0.0, "vocabulary": (10_000, 2), "ema_decay": 0.999}
    config = tuning.run_config(tmp_path / "run", tmp_path / "data", options, 6970, 391)
    trainer, model = config["trainer"], config["model"]["init_args"]
    assert trainer["max_steps"] == 6970 and trainer["limit_val_batches"] == 0
    assert config["checkpoint"]["every_n_train_steps"] == 391
    assert config["checkpoint"]["save_top_k"] == -1  # every one kept until scored
    assert config["checkpoint"]["enable_version_counter"] is False
    assert config["checkpoint"]["dirpath"] == str(tmp_path / "run" / "checkpoints")
    # The last step's checkpoint too; the average; the timing callback last.
    names = [c["class_path"].rsplit(".", 1)[-1] for c in trainer["callbacks"]]
    assert names == ["LastCheckpoint", "EMAWeightAveraging", "Clock"]
    assert trainer["callbacks"][1]["init_args"] == {"decay": 0.999}
    assert model["decoder_dropout"] == 0.0
    assert model["source_encoder"]["init_args"]["dropout"] == 0.0
    assert config["data"]["train"] == str(tmp_path / "data" / "train.tsv")
    # The member's size and optimizer as `peer_yoyodyne` has them.
    assert model["decoder_hidden_size"] == 256 and config["data"]["batch_size"] == 64
    plain = {"dropout": 0.3, "vocabulary": (10_000, 2)}
    config = tuning.run_config(tmp_path / "run", tmp_path / "data", plain, 10, 5)
    assert len(config["trainer"]["callbacks"]) == 2  # no average
    json.dumps(config)  # written as YAML by way of JSON


def test_checkpoints_are_known_by_their_step(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    names = (
        "step782.ckpt",
        "step391.ckpt",
        "step6970.ckpt",
        "last.ckpt",
        "step1-v1.ckpt",
    )
    for name in names:
        (tmp_path / "checkpoints" / name).write_bytes(b"")
    steps = tuning.checkpoint_steps(tmp_path)
    assert list(steps) == [391, 782, 6970]
    assert steps[391].name == "step391.ckpt"
    assert tuning.checkpoint_steps(tmp_path / "none") == {}


def test_the_command_line_is_the_shared_tunings():
    args, stages = tuning.parse_args(
        ["--stages", "grid", "--grid", "dropout0.3-vocab10k"]
    )
    assert stages == ("grid",) and args.grid == ("dropout0.3-vocab10k",)
    assert args.venv == tuning.py.DEFAULT_VENV
    assert args.work_dir == tuning.DEFAULT_WORK_DIR
    assert args.beam_widths == tuning.BEAM_WIDTHS == (1, 5, 10)


def test_the_search_decodes_the_beam_widths_given(capsys):
    args, _ = tuning.parse_args(["--beam-widths", "1,5"])
    assert args.beam_widths == (1, 5)
    for bad in ("1,x", "0", "1,,5"):
        with pytest.raises(SystemExit):
            tuning.parse_args(["--beam-widths", bad])
        assert f"Received: {bad!r}" in capsys.readouterr().err
