"""benchmarks.gpu_check's pieces that need no training: its arguments, the
time cap, the summary's arithmetic, and that it imports no TensorFlow."""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import gpu_check

ROOT = Path(__file__).resolve().parents[1]


def test_arguments_default_and_train_flags_pass_through():
    args = gpu_check.parse_args(["--run-dir", "r", "--batch-size", "8"])
    assert (args.seconds, args.out) == (300.0, Path("gpu_check.json"))
    assert args.member_dir == Path("r") / "gpu_check"
    assert args.train_flags == ["--batch-size", "8"]


def test_a_time_cap_of_zero_is_refused():
    with pytest.raises(SystemExit, match="Received: seconds=0"):
        gpu_check.parse_args(["--run-dir", "r", "--seconds", "0"])


def test_the_clock_stops_at_the_first_batch_past_the_deadline():
    now = [0.0]
    clock = gpu_check.Clock(deadline=10.0, batch_size=4, clock=lambda: now[0])
    for _ in range(3):
        clock.step_begin()
        now[0] += 3.0
        clock.step_end()  # 3, 6, 9 s: before the deadline
    clock.step_begin()
    now[0] += 3.0
    with pytest.raises(gpu_check.TimeUp):
        clock.step_end()  # 12 s
    assert clock.steps == [3.0] * 4


def test_the_summary_counts_steady_steps_and_the_best_validation():
    clock = gpu_check.Clock(deadline=1e9, batch_size=64)
    # 5 compiling steps, then steady ones of 0.1 and 0.3 s: median 0.1.
    clock.steps = [9.0] * 5 + [0.1, 0.1, 0.3]
    clock.validations = [
        {"examples": 128, "rouge1": 20.0},
        {"examples": 256, "rouge1": 25.0},
        {"examples": 512, "rouge1": 24.0},
    ]
    out = gpu_check.summary(clock, 50.0, 64, 1000, {"peak_rss_bytes": 1})
    assert out["examples"] == 8 * 64
    assert out["step_s_median"] == pytest.approx(0.1)
    assert out["examples_per_s"] == pytest.approx(640.0)
    assert out["examples_per_s_overall"] == pytest.approx(512 / 50)
    assert (out["best_rouge1"], out["best_rouge1_examples"]) == (25.0, 256)
    # 3 members of 1000 examples, 64 a step of 0.1 s.
    assert out["three_members_steps_s"] == pytest.approx(3 * 1000 / 64 * 0.1)


def test_no_step_time_from_compiling_steps_alone():
    clock = gpu_check.Clock(deadline=1e9, batch_size=64)
    clock.steps = [9.0, 8.0]
    out = gpu_check.summary(clock, 20.0, 64, 1000, {})
    assert out["step_s_median"] is None and out["examples_per_s"] is None


def test_it_imports_no_tensorflow():
    code = (
        "import sys, benchmarks.gpu_check as g; "
        "g.parse_args(['--run-dir', 'r']); "
        "print('tensorflow' in sys.modules, 'keras' in sys.modules); "
        # What it reads the run's flags with.
        "import train; train.parse_settings(['--backend', 'jax', '--run-dir', 'r']); "
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["False", "False", "False"]
