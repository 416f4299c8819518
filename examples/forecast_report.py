"""The forecasting example's report: its Markdown tables and its two figures.

`examples/forecast.py` writes them after training (`metrics.md`,
`forecasts.png`, `attention.png`).
"""

import numpy as np


def markdown_table(metrics, args, variables):
    """The test metrics as Markdown tables (`metrics.md`)."""
    lines = [
        f"Test set: {metrics['test_windows']} windows "
        f"({metrics['test_period']}), window W={args['window']}, "
        f"horizon H={args['horizon']}. MAE and RMSE in scaled units "
        f"(train standard deviations), averaged over the {len(variables)} "
        "variables and the H steps; MAE h=1 is the one-quarter-ahead error.",
        "",
        "| model | params | epochs run | test MAE | test RMSE | test MAE h=1 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in metrics["models"].items():
        lines.append(
            f"| {name} | {row['params']} | {row['epochs']} | {row['mae']:.3f} | "
            f"{row['rmse']:.3f} | {row['mae_h1']:.3f} |"
        )
    lines += [
        "",
        "Test MAE per variable, original units:",
        "",
        "| model | " + " | ".join(variables) + " |",
        "|---|" + "---:|" * len(variables),
    ]
    for name, row in metrics["models"].items():
        cells = " | ".join(f"{row['mae_by_variable'][v]:.2f}" for v in variables)
        lines.append(f"| {name} | {cells} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- plots


def plot_forecasts(path, data, predictions, units_label):
    """One-quarter-ahead test forecasts against the truth, one panel per variable.

    `units_label`: variable name to its unit, in the series' column order.
    """
    variables = list(units_label)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mean, std = data["mean"], data["std"]
    truth = data["y_test"][:, 0] * std + mean
    labels = data["test_quarters"]
    steps = np.arange(len(labels))
    styles = {
        "naive": dict(color="0.6", ls=":", lw=1.2),
        "lstm": dict(color="tab:blue", lw=1.4),
        "self_attn_lstm": dict(color="tab:orange", lw=1.4),
        "enc_dec_bahdanau": dict(color="tab:green", lw=1.4),
    }
    fig, axes = plt.subplots(
        len(variables), 1, figsize=(11, 2.3 * len(variables)), sharex=True
    )
    for k, (ax, var) in enumerate(zip(axes, variables, strict=True)):
        ax.plot(steps, truth[:, k], color="black", lw=2.0, label="truth")
        for name, style in styles.items():
            if name in predictions:
                pred = predictions[name][:, 0, k] * std[k] + mean[k]
                ax.plot(steps, pred, label=name, **style)
        ax.set_ylabel(f"{var}\n{units_label[var]}", fontsize=8)
        ax.grid(alpha=0.3)
    tick = max(1, len(labels) // 10)
    axes[-1].set_xticks(steps[::tick], labels[::tick])
    axes[-1].set_xlabel("forecast quarter (test period)")
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(
        handles,
        names,
        ncol=len(names),
        fontsize=9,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.965),
    )
    fig.suptitle("One-quarter-ahead forecasts vs. truth, test period", y=0.995)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_attention(path, data, attention, window, horizon):
    """Which past quarters the test forecasts attended to.

    Columns are lags: lag 0 is the last observed quarter, lag `W - 1` the
    oldest of the window. The self-attentive LSTM attends over its `W - 1`
    earlier states (lag 0, its current state, is joined after attention), so
    its lag-0 column is blank.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lags = np.arange(window - 1, -1, -1)  # oldest first, as the weights are
    labels = data["test_quarters"]
    panels = []
    if "self_attn_lstm" in attention:
        weights = attention["self_attn_lstm"][:, 0]  # same row for every step
        padded = np.concatenate([weights, np.full((len(weights), 1), np.nan)], -1)
        panels.append(
            (
                "self_attn_lstm: last step's weights over its\n"
                "earlier states (lag 0, its current state, is not attended)",
                padded,
            )
        )
    if "enc_dec_bahdanau" in attention:
        weights = attention["enc_dec_bahdanau"]
        panels.append(
            ("enc_dec_bahdanau: decoder\nstep h=1 over encoder outputs", weights[:, 0])
        )
    fig_w = 5.0 * len(panels) + (4.0 if "enc_dec_bahdanau" in attention else 0)
    fig = plt.figure(figsize=(fig_w, 0.2 * len(labels) + 2.5))
    ncols = len(panels) + ("enc_dec_bahdanau" in attention)
    grid = fig.add_gridspec(2, ncols, height_ratios=[1, 1])
    cmap = plt.get_cmap("viridis").with_extremes(bad="0.85")
    tick = max(1, len(labels) // 14)
    for k, (title, weights) in enumerate(panels):
        ax = fig.add_subplot(grid[:, k])
        image = ax.imshow(
            np.ma.masked_invalid(weights), aspect="auto", cmap=cmap, vmin=0.0
        )
        ax.set_xticks(np.arange(window), lags)
        ax.set_yticks(np.arange(len(labels))[::tick], labels[::tick])
        ax.set_xlabel("lag (quarters before the last observed one)")
        if k == 0:
            ax.set_ylabel("first forecast quarter (test windows)")
        ax.set_title(title, fontsize=10)
        fig.colorbar(image, ax=ax, fraction=0.05, pad=0.02)
    if "enc_dec_bahdanau" in attention:
        mean_weights = attention["enc_dec_bahdanau"].mean(axis=0)  # (H, W)
        ax = fig.add_subplot(grid[0, -1])
        image = ax.imshow(mean_weights, aspect="auto", cmap=cmap)
        ax.set_xticks(np.arange(window), lags)
        ax.set_yticks(np.arange(horizon), [f"h={h + 1}" for h in range(horizon)])
        ax.set_title("enc_dec_bahdanau: mean weights\nper horizon step", fontsize=10)
        fig.colorbar(image, ax=ax, fraction=0.05, pad=0.02)
        ax = fig.add_subplot(grid[1, -1])
        for name, weights in attention.items():
            profile = weights[:, 0].mean(axis=0)
            if name == "self_attn_lstm":
                profile = np.append(profile, np.nan)
            ax.plot(np.arange(window), profile, marker="o", label=name)
        ax.set_xticks(np.arange(window), lags)
        ax.set_xlabel("lag")
        ax.set_ylabel("mean weight")
        ax.set_title("mean weight per lag (h=1)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Attention of the test forecasts over the history window")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
