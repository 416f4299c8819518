"""The forecasting example (`examples/forecast.py`) runs end to end.

A smoke run (`quick=True`: tiny models, 2 epochs) on the real macrodata series:
the outputs are written, the metrics are those of the predictions (computed
again in numpy), the PNGs are valid images and every forecast's attention
weights are a distribution over the past steps.
The example is pure Keras: it runs on every backend.
"""

import json
import sys
from pathlib import Path

# Plain imports: a missing dependency fails the run, never skips it.
import matplotlib  # noqa: F401
import numpy as np
import pytest
import statsmodels  # noqa: F401


# Session scope: built once per worker process, whatever order the worker
# runs the tests in.
@pytest.fixture(scope="session")
def example():
    from examples import forecast

    return forecast


@pytest.fixture(scope="session")
def result(example, tmp_path_factory):
    output = tmp_path_factory.mktemp("forecast")
    return example.run(
        epochs=2,
        window=8,
        horizon=3,
        output=output,
        seed=0,
        quick=True,
        progress=False,
    )


def test_windows_are_chronological(example):
    data = example.prepare_data(window=8, horizon=3)
    assert data["x_train"].shape[1:] == (8, 5)
    assert data["y_test"].shape[1:] == (3, 5)
    # Scaling is fitted on the training quarters: their mean is ~0.
    train = np.concatenate([data["x_train"][0], data["y_train"][:, 0]])
    assert np.all(np.abs(train.mean(axis=0)) < 0.2)
    assert data["test_quarters"][0] == "2002Q1"
    with pytest.raises(ValueError, match="window"):
        example.prepare_data(window=150, horizon=40)


@pytest.mark.slow
def test_outputs_written(result):
    paths = result["paths"]
    for path in paths.values():
        assert Path(path).is_file() and Path(path).stat().st_size > 0
    for key in ("forecasts_png", "attention_png"):
        assert Path(paths[key]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads(Path(paths["metrics_json"]).read_text())
    assert saved["models"].keys() == result["metrics"]["models"].keys()
    table = Path(paths["metrics_md"]).read_text()
    for name in ("naive", "lstm", "self_attn_lstm", "enc_dec_bahdanau"):
        assert f"| {name} |" in table


@pytest.mark.slow
def test_metrics_are_those_of_the_predictions(example, result):
    models = result["metrics"]["models"]
    assert set(models) == {
        "naive",
        "train_mean",
        "lstm",
        "self_attn_lstm",
        "enc_dec_bahdanau",
    }
    # The test windows again, and each metric from the predictions in numpy.
    data = example.prepare_data(window=8, horizon=3)
    truth = data["y_test"]
    predictions = result["predictions"]
    # The baselines need no model: the last observed quarter, and the
    # training mean (0 once scaled).
    np.testing.assert_array_equal(
        predictions["naive"], np.repeat(data["x_test"][:, -1:], 3, axis=1)
    )
    np.testing.assert_array_equal(predictions["train_mean"], np.zeros_like(truth))
    for name, row in models.items():
        error = np.asarray(predictions[name], "float64") - truth
        assert error.shape == truth.shape, name
        assert np.all(np.isfinite(error)), name
        assert row["mae"] == pytest.approx(np.abs(error).mean(), rel=1e-6), name
        assert row["rmse"] == pytest.approx(np.sqrt((error**2).mean()), rel=1e-6)
        assert row["mae_h1"] == pytest.approx(np.abs(error[:, 0]).mean(), rel=1e-6)
        by_variable = np.abs(error).mean(axis=(0, 1)) * data["std"]
        assert list(row["mae_by_variable"].values()) == pytest.approx(
            list(by_variable), rel=1e-6
        ), name
    for name in ("lstm", "self_attn_lstm", "enc_dec_bahdanau"):
        assert models[name]["params"] > 0 and models[name]["epochs"] == 2


@pytest.mark.slow
def test_attention_sums_to_one(result):
    attention = result["attention"]
    n_test = len(result["predictions"]["lstm"])
    # Self-attention: over the W - 1 = 7 earlier states; encoder-decoder:
    # over the W = 8 encoder outputs; one row per forecast step (H = 3).
    assert attention["self_attn_lstm"].shape == (n_test, 3, 7)
    assert attention["enc_dec_bahdanau"].shape == (n_test, 3, 8)
    for weights in attention.values():
        assert np.all(weights >= 0)
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("missing", ["statsmodels.datasets", "matplotlib", "tqdm"])
def test_a_missing_package_is_one_line_naming_the_extra(
    example, missing, monkeypatch, tmp_path, capsys
):
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(SystemExit) as excinfo:
        example.main(["--quick", "--output", str(tmp_path)])
    message = str(excinfo.value)
    assert message.startswith(f"error: `{missing}` is not installed: ")
    assert 'pip install -e ".[examples]"' in message and "\n" not in message
    assert list(tmp_path.iterdir()) == []
