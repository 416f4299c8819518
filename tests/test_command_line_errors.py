"""The papers' and the examples' command lines refuse a bad flag or value in
one line on stderr, with exit status 2, before any data is read or any
model is built (as `train.py` does)."""

import subprocess
import sys
from pathlib import Path

import pytest

from examples import deploy_beam_search, forecast, tfa_migration, tfa_nmt_tutorial
from papers import entity_networks, pointer_networks, runner

ROOT = Path(__file__).resolve().parents[1]
MISSING = "/no/such/folder"


def refused(capsys, main, argv):
    """The one line `main(argv)` writes on stderr as it exits with status 2."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def never(*args, **kwargs):
    raise AssertionError("ran past a bad flag")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--epochs", "-1"], "`--epochs` must be >= 1. Received: --epochs=-1"),
        (["--lr", "0"], "`--lr` must be > 0. Received: --lr=0.0"),
        (
            ["--max-minutes", "-2"],
            "`--max-minutes` must be > 0. Received: --max-minutes=-2.0",
        ),
        (
            ["--data-dir", MISSING],
            f"`--data-dir` must be an existing folder. Received: --data-dir={MISSING}",
        ),
        (["--task", "21"], "argument --task: invalid choice: 21"),
        (["--epoch", "x"], "argument --epochs: invalid int value: 'x'"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_entity_networks(capsys, monkeypatch, tmp_path, argv, message):
    monkeypatch.setattr(entity_networks, "run", never)
    line = refused(capsys, entity_networks.main, ["--data-dir", str(tmp_path), *argv])
    assert line.startswith(f"python -m papers.entity_networks: error: {message}")
    assert line.endswith(" (see --help)")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["hull", "--beam", "0"], "`--beam` must be >= 1. Received: --beam=0"),
        (
            ["tsp", "--max-steps", "0"],
            "`--max-steps` must be >= 1. Received: --max-steps=0",
        ),
        (
            ["hull", "--learning-rate", "-0.001"],
            "`--learning-rate` must be > 0. Received: --learning-rate=-0.001",
        ),
        (
            ["hull", "--train-n", "5-x"],
            "`--train-n` and `--test-n` must be sizes (5-50 or 5,10). "
            "Received: --train-n=5-x --test-n=None",
        ),
        (["circle"], "argument task: invalid choice: 'circle'"),
    ],
)
def test_pointer_networks(capsys, monkeypatch, argv, message):
    monkeypatch.setattr(pointer_networks, "run", never)
    line = refused(capsys, pointer_networks.main, argv)
    assert line.startswith(f"python -m papers.pointer_networks: error: {message}")


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["babi", "--max-epochs", "0"],
            "`--max-epochs` must be >= 1. Received: --max-epochs=0",
        ),
        (
            ["pointer", "--data-workers", "-1"],
            "`--data-workers` must be >= 0. Received: --data-workers=-1",
        ),
        (
            ["pointer", "--lr-drop-epoch", "3", "-1"],
            "`--lr-drop-epoch` must be >= 0. Received: --lr-drop-epoch=-1",
        ),
        (
            ["babi", "--data-dir", MISSING],
            f"`--data-dir` must be an existing folder. Received: --data-dir={MISSING}",
        ),
        (
            ["babi", "--seeds", "0-x"],
            "`--tasks` and `--seeds` must be numbers or ranges (1-3). "
            "Received: --tasks=1-20 --seeds=0-x",
        ),
    ],
)
def test_papers_runner(capsys, monkeypatch, argv, message):
    monkeypatch.setattr(runner, "run_units", never)
    line = refused(capsys, runner.main, argv)
    assert line.startswith(f"python -m papers.runner: error: {message}")


def test_the_runner_as_a_command(tmp_path):
    # `python -m papers.runner` imports no framework before its checks.
    done = subprocess.run(
        [sys.executable, "-m", "papers.runner", "show", "--slice-epochs", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "python -m papers.runner: error: `--slice-epochs` must be >= 1. "
        "Received: --slice-epochs=0 (see --help)\n"
    )


@pytest.mark.parametrize(
    "example, argv, message",
    [
        (
            forecast,
            ["--horizon", "0"],
            "`--horizon` must be >= 1. Received: --horizon=0",
        ),
        (
            forecast,
            ["--patience", "-1"],
            "`--patience` must be >= 0. Received: --patience=-1",
        ),
        (
            tfa_nmt_tutorial,
            ["--units", "1"],
            "`--units` must be >= 2. Received: --units=1",
        ),
        (
            tfa_nmt_tutorial,
            ["--pairs", "0"],
            "`--pairs` must be >= 1. Received: --pairs=0",
        ),
        (tfa_migration, ["--steps", "3"], "unrecognized arguments: --steps 3"),
        (
            deploy_beam_search,
            [MISSING, "--run"],
            "`folder` must hold beam_search.onnx, beam_search.tflite, sources.npy "
            f"with --run. Received: folder={MISSING} (no beam_search.onnx)",
        ),
        (deploy_beam_search, [], "the following arguments are required: folder"),
    ],
)
def test_examples(capsys, monkeypatch, example, argv, message):
    for name in ("run", "train", "export", "run_exported"):
        if hasattr(example, name):
            monkeypatch.setattr(example, name, never)
    line = refused(capsys, example.main, argv)
    name = example.__name__
    assert line == f"python -m {name}: error: {message} (see --help)"
