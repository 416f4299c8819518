"""Multivariate time-series forecasting: a plain LSTM against two attention models.

The question: "I want to forecast the new values of a multivariate time series,
given its historical values. It is clear how to do that with an LSTM. How would
I do the same with an attention-based model?" This script answers it on real
data and compares, on the same windows and the same training budget:

1. `lstm`: a plain LSTM over the history; its last state goes through a
   `Dense` layer that outputs all `H` future steps of all variables at once.
2. `self_attn_lstm`: the same, but the LSTM cell attends over its own earlier
   states at every step: `AttentionRNN(AttentionCellWrapper(LSTMCell(u),
   BahdanauAttention(u), style="self", max_length=W - 1,
   return_alignments=True))`. `max_length=W - 1` because the buffer holds the
   *earlier* states: at the last step it holds exactly the `W - 1` states
   before the current one (the current one joins through `W_c`).
3. `enc_dec_bahdanau`: an encoder-decoder. An LSTM encoder reads the history;
   a decoder runs `H` steps (one per forecast quarter, its input the one-hot
   horizon step and the last observed values), starts from the encoder's final
   `[h, c]` and, at every step, attends over all `W` encoder outputs with
   Bahdanau attention (`AttentionCellWrapper(style="bahdanau")` run by
   `AttentionRNN` over the memory). Each decoder output goes through a
   `Dense(n_variables)`.

Plus two baselines that need no training: `naive` (every future quarter equals
the last observed one) and `train_mean` (every future value is the training
mean, i.e. 0 in scaled units).

Data: `statsmodels.datasets.macrodata`, shipped with statsmodels (no download):
quarterly US macro series, 1959Q1-2009Q3. Levels trend, so each variable is
made (roughly) stationary first:

* `gdp`, `consumption`, `investment`: annualised quarter-on-quarter growth of
  real GDP, real consumption and real investment, `400 * diff(log(x))`, in %.
* `inflation`: annualised CPI inflation, `400 * diff(log(cpi))`, in %.
* `unemployment`: change of the unemployment rate, `diff(unemp)`, in
  percentage points.

That leaves 202 quarters (1959Q2-2009Q3). A sample is a window of `W` quarters
(`--window`, default 12) of all five variables, `(W, 5)`, and its target the
next `H` quarters (`--horizon`, default 4), `(H, 5)`. The split is
chronological, on the quarters being forecast: the first 70% of the quarters
for training, the next 15% for validation (early stopping), the last 15% (from
2002Q1, so including the 2008-09 recession) for the test. A window belongs to a
split only if all its target quarters do. Each variable is standardised with
the mean and standard deviation of the training quarters only.

Metrics are in *scaled* units (each variable divided by its training standard
deviation), averaged over the five variables and the `H` horizon steps, so
that variables in % and in percentage points can be averaged;
`metrics.json` also has each variable's MAE in its original units.

Every model has about the same number of parameters (the attention models get
fewer LSTM units to pay for their attention weights), the same optimizer, the
same batches, the same epoch budget and the same early stopping on the
validation loss (best weights restored).

Outputs, in `--output` (default `examples/output/`):
`metrics.json`, `metrics.md` (the table), `forecasts.png` (one-quarter-ahead
forecasts against the truth over the test period, one panel per variable) and
`attention.png` (which past quarters each test forecast attended to).

Usage (the data, the plots and the progress bars need the `examples` extra,
`pip install -e ".[examples]"`):

```
python -m examples.forecast                       # full run, a few minutes on CPU
python -m examples.forecast --quick               # a smoke run of a few epochs
python -m examples.forecast --window 8 --horizon 1 --epochs 100
KERAS_BACKEND=jax python -m examples.forecast     # any Keras backend
```
"""

import json
import time
from pathlib import Path

import keras
import numpy as np
from keras import ops

from examples.command_line import OneLineParser, check_at_least
from examples.forecast_report import (
    markdown_table,
    plot_attention,
    plot_forecasts,
)
from examples.optional import MissingExtra, require
from keras_attn import (
    AttentionCellWrapper,
    AttentionRNN,
    BahdanauAttention,
)

VARIABLES = ("gdp", "consumption", "investment", "inflation", "unemployment")
UNITS_LABEL = {
    "gdp": "% (annualised q/q growth)",
    "consumption": "% (annualised q/q growth)",
    "investment": "% (annualised q/q growth)",
    "inflation": "% (annualised CPI inflation)",
    "unemployment": "pp (change of the rate)",
}
MODEL_NAMES = ("lstm", "self_attn_lstm", "enc_dec_bahdanau")
BASELINES = ("naive", "train_mean")
# LSTM units per model, chosen so that the three have about the same number of
# parameters (~5-6k for 5 variables, W=12, H=4): attention costs weights.
UNITS = {"lstm": 32, "self_attn_lstm": 23, "enc_dec_bahdanau": 17}
QUICK_UNITS = {"lstm": 8, "self_attn_lstm": 6, "enc_dec_bahdanau": 6}


# ---------------------------------------------------------------- data


def load_macro_series():
    """Loads the five stationary quarterly series.

    Returns:
        `(values, quarters)`: float32 `(202, 5)` in original units (columns in
        `VARIABLES` order) and the quarter labels, e.g. `"1959Q2"`.
    """
    from statsmodels.datasets import macrodata

    raw = macrodata.load_pandas().data

    def growth(column):
        return 400.0 * np.diff(np.log(raw[column].to_numpy(np.float64)))

    values = np.stack(
        [
            growth("realgdp"),
            growth("realcons"),
            growth("realinv"),
            growth("cpi"),
            np.diff(raw["unemp"].to_numpy(np.float64)),
        ],
        axis=-1,
    ).astype("float32")
    quarters = [
        f"{int(y)}Q{int(q)}"
        for y, q in zip(raw["year"][1:], raw["quarter"][1:], strict=True)
    ]
    return values, quarters


def make_windows(series, window, horizon):
    """Every `(history, target)` pair of a series.

    Args:
        series: `(T, n)`.
        window: History length `W`.
        horizon: Forecast length `H`.

    Returns:
        `(inputs, targets, first_target)`: `(N, W, n)`, `(N, H, n)` and the
        index in `series` of each target's first quarter, `(N,)`.
    """
    count = len(series) - window - horizon + 1
    if count <= 0:
        raise ValueError(
            f"A series of {len(series)} steps has no window of {window} steps "
            f"followed by {horizon}. Received: window={window}, "
            f"horizon={horizon}"
        )
    starts = np.arange(count)
    inputs = np.stack([series[s : s + window] for s in starts])
    targets = np.stack([series[s + window : s + window + horizon] for s in starts])
    return inputs, targets, starts + window


def prepare_data(window, horizon, train_frac=0.70, val_frac=0.15):
    """Scaled windows with a chronological train/validation/test split.

    Returns:
        A dict with `x_train, y_train, x_val, y_val, x_test, y_test` (scaled),
        `mean`, `std` (per variable, from the training quarters only),
        `test_quarters` (the label of each test target's first quarter) and
        `quarters`.
    """
    values, quarters = load_macro_series()
    total = len(values)
    val_start, test_start = (
        int(train_frac * total),
        int((train_frac + val_frac) * total),
    )
    # Statistics of the training period only: no peeking at the future.
    mean = values[:val_start].mean(axis=0)
    std = values[:val_start].std(axis=0)
    scaled = (values - mean) / std
    x, y, first = make_windows(scaled, window, horizon)
    last = first + horizon - 1
    splits = {
        "train": last < val_start,
        "val": (first >= val_start) & (last < test_start),
        "test": first >= test_start,
    }
    data = {"mean": mean, "std": std, "quarters": quarters}
    for name, keep in splits.items():
        if not keep.any():
            raise ValueError(
                f"The {name} split has no window of {window} + {horizon} "
                f"quarters; use a shorter --window or --horizon."
            )
        data[f"x_{name}"], data[f"y_{name}"] = x[keep], y[keep]
    data["test_quarters"] = [quarters[i] for i in first[splits["test"]]]
    return data


# ---------------------------------------------------------------- models


@keras.saving.register_keras_serializable(package="forecast_example")
class DecoderInputs(keras.layers.Layer):
    """The decoder's inputs: `[one_hot(step); last observed values]` per step.

    The forecast is not autoregressive (no forecast is fed back), so each of
    the `H` decoder steps only needs to know which horizon it is.

    Args:
        horizon: Number of decoder steps `H`.

    Call arguments:
        history: `(batch, W, n)`.

    Returns:
        `(batch, H, H + n)`.
    """

    def __init__(self, horizon, **kwargs):
        super().__init__(**kwargs)
        self.horizon = horizon

    def call(self, history):
        batch = ops.shape(history)[0]
        steps = ops.eye(self.horizon, dtype=history.dtype)
        steps = ops.broadcast_to(steps[None], (batch, self.horizon, self.horizon))
        last = ops.repeat(history[:, -1:, :], self.horizon, axis=1)
        return ops.concatenate([steps, last], axis=-1)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.horizon, self.horizon + input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "horizon": self.horizon}


def build_model(name, window, horizon, n_vars, units):
    """Builds one forecaster.

    Args:
        name: One of `MODEL_NAMES`.
        window: History length `W`.
        horizon: Forecast length `H`.
        n_vars: Number of variables `n`.
        units: LSTM units.

    Returns:
        `(model, inspect)`: `model` maps a history `(batch, W, n)` to the
        forecast `(batch, H, n)` (the one to train); `inspect`, sharing its
        weights, also returns the attention weights, `(batch, H, L)` with `L`
        the attended lags, or None for the plain LSTM.
    """
    history = keras.Input((window, n_vars), name="history")
    alignments = None
    if name == "lstm":
        last = keras.layers.LSTM(units, name="lstm")(history)
        flat = keras.layers.Dense(horizon * n_vars, name="head")(last)
        forecast = keras.layers.Reshape((horizon, n_vars), name="forecast")(flat)
    elif name == "self_attn_lstm":
        cell = AttentionCellWrapper(
            keras.layers.LSTMCell(units),
            BahdanauAttention(units),
            style="self",
            max_length=window - 1,
            return_alignments=True,
        )
        # Only the last step's output (and alignments) feed the forecast.
        last, alignments = AttentionRNN(
            cell, return_sequences=False, name="self_attn_lstm"
        )(history)
        flat = keras.layers.Dense(horizon * n_vars, name="head")(last)
        forecast = keras.layers.Reshape((horizon, n_vars), name="forecast")(flat)
        # One row of weights for the whole forecast: repeat it for each step.
        alignments = keras.layers.RepeatVector(horizon, name="alignments")(alignments)
    elif name == "enc_dec_bahdanau":
        memory, h, c = keras.layers.LSTM(
            units, return_sequences=True, return_state=True, name="encoder"
        )(history)
        cell = AttentionCellWrapper(
            keras.layers.LSTMCell(units),
            BahdanauAttention(units),
            style="bahdanau",
            return_alignments=True,
        )
        decoded, alignments = AttentionRNN(cell, name="decoder")(
            [DecoderInputs(horizon, name="decoder_inputs")(history), memory],
            initial_state=[h, c],
        )
        forecast = keras.layers.Dense(n_vars, name="forecast")(decoded)
    else:
        raise ValueError(f"Unknown model {name!r}; expected one of {MODEL_NAMES}.")
    model = keras.Model(history, forecast, name=name)
    inspect = None
    if alignments is not None:
        inspect = keras.Model(history, [forecast, alignments], name=f"{name}_inspect")
    return model, inspect


class TqdmEpochs(keras.callbacks.Callback):
    """One tqdm bar per model, one tick per epoch, with the losses."""

    def __init__(self, epochs, desc):
        super().__init__()
        self.epochs, self.desc, self.bar = epochs, desc, None

    def on_train_begin(self, logs=None):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=self.epochs, desc=self.desc, unit="epoch", leave=True)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        self.bar.set_postfix(
            loss=f"{logs.get('loss', float('nan')):.3f}",
            val=f"{logs.get('val_loss', float('nan')):.3f}",
        )
        self.bar.update(1)

    def on_train_end(self, logs=None):
        self.bar.close()


# ---------------------------------------------------------------- metrics


def errors(pred, truth):
    """MAE, RMSE over everything, and MAE of the first horizon step."""
    diff = np.asarray(pred, np.float64) - np.asarray(truth, np.float64)
    return {
        "mae": float(np.mean(np.abs(diff))),
        "rmse": float(np.sqrt(np.mean(diff**2))),
        "mae_h1": float(np.mean(np.abs(diff[:, 0]))),
    }


def per_variable_mae(pred, truth, std):
    """MAE of each variable, in its original units."""
    mae = np.mean(np.abs(pred - truth), axis=(0, 1)) * std
    return {v: float(m) for v, m in zip(VARIABLES, mae, strict=True)}


# ---------------------------------------------------------------- run


def run(
    epochs=200,
    window=12,
    horizon=4,
    output="examples/output",
    seed=0,
    quick=False,
    patience=20,
    batch_size=16,
    learning_rate=3e-3,
    progress=True,
):
    """Trains the three models, evaluates them and writes the outputs.

    Args:
        epochs: Maximum number of epochs per model.
        window: History length `W` (quarters).
        horizon: Forecast length `H` (quarters).
        output: Output directory.
        seed: Seed of the weights and the batch order.
        quick: Smoke run: at most 3 epochs and tiny models.
        patience: Early-stopping patience (epochs without a better val loss).
        batch_size: Batch size.
        learning_rate: Adam learning rate.
        progress: Show a tqdm bar per model.

    Returns:
        A dict: `metrics` (as in `metrics.json`), `predictions` and
        `attention` (test set, per model: `(N, H, n)` scaled forecasts and
        `(N, H, L)` attention weights) and `paths` of the files written.
    """
    if window < 2 or horizon < 1:
        raise ValueError(
            f"Need window >= 2 and horizon >= 1. Received: window={window}, "
            f"horizon={horizon}"
        )
    require("statsmodels.datasets", "matplotlib", *(("tqdm",) if progress else ()))
    if quick:
        epochs = min(epochs, 3)
    units = QUICK_UNITS if quick else UNITS
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    settings = dict(
        epochs=epochs,
        window=window,
        horizon=horizon,
        seed=seed,
        quick=quick,
        patience=patience,
        batch_size=batch_size,
        learning_rate=learning_rate,
        lstm_units={k: units[k] for k in MODEL_NAMES},
    )
    data = prepare_data(window, horizon)
    predictions, rows = _baselines(data, horizon)
    trained, attention, trained_rows = _train_and_predict(data, settings, progress)
    predictions.update(trained)
    rows.update(trained_rows)
    metrics = _metrics(data, predictions, rows, settings)
    paths = _write_outputs(
        output, metrics, data, predictions, attention, window, horizon
    )
    return {
        "metrics": metrics,
        "predictions": predictions,
        "attention": attention,
        "paths": paths,
    }


def _baselines(data, horizon):
    """The baselines' test forecasts and their (empty) rows of the results."""
    x_test, y_test = data["x_test"], data["y_test"]
    predictions = {
        "naive": np.repeat(x_test[:, -1:, :], horizon, axis=1),
        "train_mean": np.zeros_like(y_test),
    }
    rows = {}
    for name in BASELINES:
        rows[name] = {"params": 0, "epochs": 0, "seconds": 0.0}
    return predictions, rows


def _train_and_predict(data, settings, progress):
    """Trains each of `MODEL_NAMES` and forecasts the test set with it.

    Returns:
        `(predictions, attention, rows)`, each by model name: the scaled test
        forecasts, the attention weights (of the models that have them) and
        the rows of the results.
    """
    window, horizon = settings["window"], settings["horizon"]
    n_vars = data["x_train"].shape[-1]
    predictions, attention, rows = {}, {}, {}
    for name in MODEL_NAMES:
        # The same seed for every model: same initial draws, same batch order.
        keras.utils.set_random_seed(settings["seed"])
        model, inspect = build_model(
            name, window, horizon, n_vars, settings["lstm_units"][name]
        )
        rows[name] = _fit(model, data, name, settings, progress)
        if inspect is None:
            predictions[name] = model.predict(data["x_test"], verbose=0)
        else:
            predictions[name], weights = inspect.predict(data["x_test"], verbose=0)
            attention[name] = np.asarray(weights, np.float32)
    return predictions, attention, rows


def _fit(model, data, name, settings, progress):
    """Compiles and trains one forecaster, early-stopped on the validation loss.

    Returns:
        Its row of the results: `params`, `epochs`, `best_val_loss`, `seconds`.
    """
    epochs = settings["epochs"]
    model.compile(
        optimizer=keras.optimizers.Adam(settings["learning_rate"], clipnorm=1.0),
        loss="mse",
    )
    callbacks = [
        keras.callbacks.EarlyStopping(
            patience=settings["patience"], restore_best_weights=True, monitor="val_loss"
        )
    ]
    if progress:
        callbacks.append(TqdmEpochs(epochs, name))
    start = time.perf_counter()
    history = model.fit(
        data["x_train"],
        data["y_train"],
        validation_data=(data["x_val"], data["y_val"]),
        epochs=epochs,
        batch_size=settings["batch_size"],
        shuffle=True,
        callbacks=callbacks,
        verbose=0,
    )
    seconds = time.perf_counter() - start
    return {
        "params": int(model.count_params()),
        "epochs": len(history.history["loss"]),
        "best_val_loss": float(min(history.history["val_loss"])),
        "seconds": round(seconds, 1),
    }


def _metrics(data, predictions, rows, settings):
    """`metrics.json`'s content: the data, each model's errors, the settings."""
    y_test = data["y_test"]
    metrics = {
        "backend": keras.backend.backend(),
        "units": "scaled (per-variable train std); mae_by_variable: original",
        "variables": list(VARIABLES),
        "train_windows": len(data["x_train"]),
        "val_windows": len(data["x_val"]),
        "test_windows": len(data["x_test"]),
        "test_period": f"{data['test_quarters'][0]}-{data['quarters'][-1]}",
        "models": {},
    }
    for name in (*BASELINES, *MODEL_NAMES):
        metrics["models"][name] = {
            **rows[name],
            **errors(predictions[name], y_test),
            "mae_by_variable": per_variable_mae(predictions[name], y_test, data["std"]),
        }
    metrics["settings"] = settings
    return metrics


def _write_outputs(output, metrics, data, predictions, attention, window, horizon):
    """Writes the metrics (JSON and table) and the two figures into `output`.

    Returns:
        The paths written, by key (`metrics_json`, `metrics_md`,
        `forecasts_png`, `attention_png`).
    """
    paths = {
        "metrics_json": output / "metrics.json",
        "metrics_md": output / "metrics.md",
        "forecasts_png": output / "forecasts.png",
        "attention_png": output / "attention.png",
    }
    paths["metrics_json"].write_text(json.dumps(metrics, indent=2) + "\n")
    paths["metrics_md"].write_text(
        markdown_table(metrics, metrics["settings"], VARIABLES)
    )
    plot_forecasts(paths["forecasts_png"], data, predictions, UNITS_LABEL)
    plot_attention(paths["attention_png"], data, attention, window, horizon)
    return paths


def main(argv=None):
    parser = OneLineParser(
        prog="python -m examples.forecast",
        description=(
            "Forecast US macro series (statsmodels macrodata) with an LSTM, a "
            "self-attentive LSTM and a Bahdanau encoder-decoder."
        ),
    )
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--window", type=int, default=12)
    parser.add_argument("--horizon", type=int, default=4)
    parser.add_argument("--output", default="examples/output")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="3 epochs, tiny models")
    parser.add_argument("--patience", type=int, default=20)
    args = parser.parse_args(argv)
    check_at_least(
        parser, args, {"epochs": 1, "window": 1, "horizon": 1, "patience": 0}
    )
    try:
        result = run(
            epochs=args.epochs,
            window=args.window,
            horizon=args.horizon,
            output=args.output,
            seed=args.seed,
            quick=args.quick,
            patience=args.patience,
        )
    except MissingExtra as error:
        raise SystemExit(f"error: {error}") from None
    print()
    print(result["paths"]["metrics_md"].read_text())
    for key in ("metrics_json", "forecasts_png", "attention_png"):
        print(f"wrote {result['paths'][key]}")


if __name__ == "__main__":
    main()
