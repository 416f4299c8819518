"""`train.py --risk-updates`: minimum-risk fine-tuning after training, its
record, the weights it exports, a rerun that resumes instead of training
again; its options' defaults (Edunov et al.'s recipe) and warm-up."""

import pytest

pytestmark = pytest.mark.tf_only

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
from e2e import ROOT, train_command, write_org_data  # noqa: E402

import models.model.summarizer  # noqa: E402, F401  (registers the model with Keras)
from models.settings.errors import UserError  # noqa: E402
from models.settings.risk import RiskOptions  # noqa: E402
from models.training.risk_fine_tuning import LinearWarmUp, read_state  # noqa: E402

# `risk/state.json` as the stage has written it since it counted updates:
# a stage cut after its first validation interval, of 2 updates.
STATE_WRITTEN_BEFORE = """{
  "updates": 2,
  "validated_at": [
    0,
    2
  ],
  "rouge1": [
    12.5,
    13.25
  ],
  "best_validation": 1,
  "seconds": 4.5,
  "examples": 16
}
"""
STATE_KEYS = {"updates", "validated_at", "rouge1", "best_validation"}
STATE_KEYS |= {"seconds", "examples"}

# Two updates of beam candidates, one validation after them.
RISK = ["--risk-updates", "2", "--risk-validate-every", "2"]
RISK += ["--risk-examples", "16", "--risk-candidates", "3"]
# Likelihood training of one validation, after two batches.
ONE_VALIDATION = ["--validate-every", "16", "--train-examples", "16"]


def _train(command):
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)


def _weights(path):
    return [np.asarray(w) for w in keras.saving.load_model(path, compile=False).weights]


@pytest.mark.slow
def test_risk_stage_records_exports_and_resumes(tmp_path):
    write_org_data(tmp_path / "data", sizes=(40, 8, 8))
    command = train_command(tmp_path, *ONE_VALIDATION, "--max-eval-examples", "4")
    result = _train([*command, *RISK])
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("minimum risk, update 2/2:") == 1
    assert "minimum risk, update 1/" not in result.stderr

    state = json.loads((tmp_path / "run" / "risk" / "state.json").read_text())
    assert state["updates"] == 2 and state["validated_at"] == [0, 2]
    assert len(state["rouge1"]) == 2
    metrics = json.loads((tmp_path / "export" / "1" / "metrics.json").read_text())
    record = metrics["training"]["members"][0]["minimum_risk"]
    assert record["updates"] == 2
    assert record["best_updates"] == state["validated_at"][state["best_validation"]]
    assert record["rouge1"] == [round(r, 2) for r in state["rouge1"]]
    # The export serves the fine-tuned weights: the best of before and after.
    served = _weights(tmp_path / "export" / "1" / "model.keras")
    tuned = _weights(tmp_path / "run" / "risk" / "model.keras")
    for a, b in zip(served, tuned, strict=True):
        np.testing.assert_array_equal(a, b)
    moved = any(
        not np.array_equal(a, b)
        for a, b in zip(served, _weights(tmp_path / "run" / "model.keras"), strict=True)
    )
    assert moved == (state["best_validation"] == 1)

    # The same command again: the stage has run its updates, nothing retrains.
    result = _train([*command, *RISK])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "minimum risk, update" not in result.stderr
    state_again = json.loads((tmp_path / "run" / "risk" / "state.json").read_text())
    assert state_again == state


@pytest.mark.slow
def test_the_validation_cap_bounds_the_risk_stage(tmp_path):
    """`--stop-after-validations` counts the stage's validations too: the
    member it cuts in the stage is not served, and the same command goes on
    from the stage's last validation. Sampled candidates and the reference
    here, the other way to draw them."""
    write_org_data(tmp_path / "data", sizes=(40, 8, 8))
    command = train_command(tmp_path, *ONE_VALIDATION, "--skip-eval")
    risk = [*RISK, "--risk-updates", "3", "--risk-validate-every", "1"]
    risk += ["--risk-patience", "5", "--risk-method", "sample"]
    risk += ["--risk-include-reference"]
    # One validation of training, one of the stage's: cut after update 1.
    result = _train([*command, *risk, "--stop-after-validations", "2"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("minimum risk, update 1/3:") == 1
    assert "minimum risk, update 2" not in result.stderr
    assert "member 1's minimum-risk fine-tuning is unfinished (1 updates)" in (
        result.stderr
    )
    assert "nothing is exported" in result.stderr
    assert not (tmp_path / "export").exists()
    assert not (tmp_path / "run" / "risk" / "model.keras").exists()
    state_path = tmp_path / "run" / "risk" / "state.json"
    state = json.loads(state_path.read_text())
    assert state["updates"] == 1
    # The state's keys are those a stage wrote before; written as it wrote
    # them, the state resumes.
    assert set(state) == STATE_KEYS
    state_path.write_text(json.dumps(state, indent=2) + "\n")

    # The same command, uncapped: updates 2 and 3 only, then the export.
    result = _train([*command, *risk])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "minimum risk, update 1/3:" not in result.stderr
    assert result.stderr.count("minimum risk, update 3/3:") == 1
    assert "[train.py] minimum risk, update 2/3: validation ROUGE-1" in result.stderr
    training = json.loads((tmp_path / "export" / "1" / "training.json").read_text())
    (member,) = training["members"]
    assert member["served"] and member["minimum_risk"]["finished"]
    assert member["minimum_risk"]["updates"] == 3
    assert (tmp_path / "run" / "risk" / "model.keras").is_file()


def test_the_default_options_are_edunov_et_al_s_recipe():
    options = RiskOptions(risk_updates=2000)
    assert options.risk_method == "beam" and options.risk_candidates == 8
    assert not options.risk_include_reference
    assert options.risk_length_normalize and options.risk_nll_weight == 0.5
    assert options.risk_warmup_updates == 200  # a tenth of the updates
    assert (
        RiskOptions(risk_updates=2000, risk_warmup_updates=0).risk_warmup_updates == 0
    )


def test_the_learning_rate_rises_linearly_over_the_warm_up():
    rates = [float(LinearWarmUp(1e-3, 4)(step)) for step in range(6)]
    np.testing.assert_allclose(rates, [2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3])
    assert float(LinearWarmUp(1e-3, 0)(0)) == np.float32(1e-3)


@pytest.mark.parametrize(
    "field, value",
    [
        ("risk_updates", -1),
        ("risk_validate_every", 0),
        ("risk_patience", 0),
        ("risk_min_updates", -1),
        ("risk_candidates", 0),
        ("risk_method", "greedy"),
        ("risk_nll_weight", 1.5),
        ("risk_warmup_updates", -1),
    ],
)
def test_risk_options_refuse_bad_values(field, value):
    with pytest.raises(UserError, match=f"Received: {field}="):
        RiskOptions(**{field: value})


def test_the_reference_takes_a_candidate_place():
    with pytest.raises(UserError, match="risk_candidates=1"):
        RiskOptions(risk_candidates=1, risk_include_reference=True)
    assert RiskOptions(risk_candidates=1).risk_candidates == 1


def test_a_state_written_before_is_read_as_it_is(tmp_path):
    (tmp_path / "state.json").write_text(STATE_WRITTEN_BEFORE)
    state = read_state(tmp_path)
    assert state == {
        "updates": 2,
        "validated_at": [0, 2],
        "rouge1": [12.5, 13.25],
        "best_validation": 1,
        "seconds": 4.5,
        "examples": 16,
    }
    assert read_state(tmp_path / "none") is None
    (tmp_path / "state.json").write_text(json.dumps({"steps": 2}))
    with pytest.raises(
        UserError, match=r"must hold `updates` .* Received: keys=\['steps'\]$"
    ):
        read_state(tmp_path)
