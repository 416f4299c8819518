"""The recipe in validations: a member cut by a cap is never served, and the
same command finishes it exactly as an uncut run trains it, from a cut
between two validations in the middle of a pass too.

The cap is `--stop-after-validations`, which falls at the same validation on
every machine, so these tests do not depend on the machine's speed. Each
command is its own process, as a user runs it.
"""

import pytest

pytestmark = [pytest.mark.tf_only, pytest.mark.slow]

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
from e2e import ROOT, train_command, write_org_data  # noqa: E402

import models.model.summarizer  # noqa: E402, F401  (registers the model with Keras)

# 40 pairs: a pass of 6 batches of 8 (the length buckets of a 16-token
# source cut leave partial batches). A validation every 3 batches (24
# examples): after batches 3, 6 and 9 of the stream; 3 and 9 inside a pass.
# Two members of three validations each; no early stopping within them.
ENSEMBLE = ["--ensemble", "2", "--validate-every", "24", "--train-examples", "72"]
ENSEMBLE += ["--patience", "10", "--min-train-examples", "0"]
ENSEMBLE += ["--max-eval-examples", "4"]


def _train(command):
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    return result.returncode, result.stderr


def _member_weights(path):
    return [np.asarray(w) for w in keras.saving.load_model(path, compile=False).weights]


def test_cut_member_is_not_served_then_resumed_exactly(tmp_path):
    write_org_data(tmp_path / "data", sizes=(40, 8, 8))
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "data").symlink_to(tmp_path / "data")
    command = train_command(cut, *ENSEMBLE)

    # 1 validation: member 1 is cut at batch 3 of its first pass of 6.
    code, err = _train([*command, "--stop-after-validations", "1"])
    assert code == 0, err[-3000:]
    schedule = json.loads((cut / "run" / "schedule.json").read_text())
    assert (schedule["pass_batches"], schedule["interval_batches"]) == (6, 3)
    assert schedule["max_validations"] == 3
    assert "member 1 is unfinished (1 validations, 24 examples)" in err
    assert "no member has finished, so nothing is exported" in err
    assert not (cut / "export").exists()

    # 3 more: member 1 resumes mid-pass and finishes (validation 3 ends
    # at batch 9, mid-pass again); member 2 is cut after 1.
    code, err = _train([*command, "--stop-after-validations", "3"])
    assert code == 0, err[-3000:]
    assert "member 1/2: training (seed 0, from validation 2)" in err
    export_1 = cut / "export" / "1"
    assert sorted(p.name for p in export_1.glob("*.keras")) == ["model.keras"]
    metrics = json.loads((export_1 / "metrics.json").read_text())
    members = metrics["training"]["members"]
    assert [m["served"] for m in members] == [True, False]
    assert not any("finished" in m for m in members)
    assert [m["validations"] for m in members] == [3, 1]
    assert [m["examples"] for m in members] == [72, 24]
    assert members[0]["reason"] == "example_limit"
    assert metrics["training"]["served_members"] == 1
    assert metrics["training"]["schedule"] == schedule
    assert "member 2 is unfinished (1 validations, 24 examples)" in err
    assert not (cut / "run" / "member-1" / "model.keras").exists()

    # The same command, uncapped, finishes member 2 and serves both.
    code, err = _train(command)
    assert code == 0, err[-3000:]
    assert "member 1/2: finished earlier (3 validations, example_limit)" in err
    export_2 = cut / "export" / "2"
    assert sorted(p.name for p in export_2.glob("*.keras")) == [
        "member-1.keras",
        "model.keras",
    ]
    training = json.loads((export_2 / "training.json").read_text())
    assert [m["validations"] for m in training["members"]] == [3, 3]
    assert all(m["served"] for m in training["members"])
    assert training["machine"]["cores"] >= 1

    # A changed schedule is refused in one line.
    code, err = _train([*command, "--validate-every", "40"])
    assert code == 2
    assert "train.py: error: `validate_every` must be 24" in err

    # A run never cut trains the same weights.
    whole = tmp_path / "whole"
    whole.mkdir()
    (whole / "data").symlink_to(tmp_path / "data")
    code, err = _train(train_command(whole, *ENSEMBLE, "--skip-eval"))
    assert code == 0, err[-3000:]
    for name in ("model.keras", "member-1.keras"):
        got = _member_weights(export_2 / name)
        want = _member_weights(whole / "export" / "1" / name)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)
