"""Attention heatmaps: headline words (rows) against source words (columns).

The labels are the words as the reader sees them: the readable headline's
and the document's as written (the `attention` signature's `headline_words`
and `source_words`), not the normalized tokens. `plot_examples` draws an
export's examples into a folder (`models.evaluation.evaluate`).

Figures are drawn on a bare `matplotlib.figure.Figure` with the Agg canvas
rather than through `pyplot`, so rendering holds no global state: it works
headless and is safe to call from the threads of a web server.
"""

import io
import os
import textwrap

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

# Inches per token along each axis, and the bounds of the figure size.
_CELL_W = 0.32
_CELL_H = 0.32
_MIN_W, _MAX_W = 4.0, 40.0
_MIN_H, _MAX_H = 2.5, 20.0


def _as_text(token):
    if isinstance(token, bytes):
        return token.decode("utf-8", errors="replace")
    return str(token)


def _escape(text):
    # Matplotlib would read a pair of "$" (e.g. "us$ ... $") as mathtext.
    return text.replace("$", r"\$")


def _trim(attention, source_words, headline_words):
    """Drops padding ("" words) from the labels and the attention matrix."""
    source = [_as_text(t) for t in np.asarray(source_words, dtype=object).ravel()]
    headline = [_as_text(t) for t in np.asarray(headline_words, dtype=object).ravel()]
    attention = np.asarray(attention, dtype=np.float32)
    if attention.ndim != 2 or attention.shape != (len(headline), len(source)):
        raise ValueError(
            "`attention` must have shape [T, S] = "
            f"[{len(headline)}, {len(source)}] (headline words, source words). "
            f"Received: attention.shape={attention.shape}"
        )
    rows = [i for i, t in enumerate(headline) if t != ""]
    cols = [j for j, t in enumerate(source) if t != ""]
    attention = attention[np.ix_(rows, cols)]
    return (
        attention,
        [source[j] for j in cols],
        [headline[i] for i in rows],
    )


def _render(attention, source_words, headline_words, title=None):
    attention, source, headline = _trim(attention, source_words, headline_words)
    t, s = attention.shape
    width = float(np.clip(_CELL_W * s + 2.5, _MIN_W, _MAX_W))
    height = float(np.clip(_CELL_H * t + 2.0, _MIN_H, _MAX_H))
    # Room for the rotated source labels, which hang below the matrix.
    longest = max((len(w) for w in source), default=0)
    height = min(height + 0.07 * min(longest, 20), _MAX_H)

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if t == 0 or s == 0:
        ax.text(0.5, 0.5, "no words to show", ha="center", va="center")
        ax.set_axis_off()
    else:
        vmax = float(attention.max()) or 1.0
        image = ax.imshow(
            attention,
            cmap="viridis",
            vmin=0.0,
            vmax=vmax,
            aspect="auto",
            interpolation="nearest",
        )
        ax.set_xticks(np.arange(s))
        ax.set_yticks(np.arange(t))
        ax.set_xticklabels(
            [_escape(w) for w in source],
            rotation=60,
            ha="right",
            rotation_mode="anchor",
            fontsize=9,
        )
        ax.set_yticklabels([_escape(w) for w in headline], fontsize=9)
        ax.set_xlabel("source")
        ax.set_ylabel("headline")
        # Thin white grid between cells keeps neighbouring words apart.
        ax.set_xticks(np.arange(s + 1) - 0.5, minor=True)
        ax.set_yticks(np.arange(t + 1) - 0.5, minor=True)
        ax.grid(which="minor", color="white", linewidth=0.5)
        ax.tick_params(which="minor", length=0)
        colorbar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
        colorbar.set_label("attention weight")
    if title:
        chars = max(int(width * 11), 30)
        ax.set_title(_escape(textwrap.fill(str(title), chars)), fontsize=10)
    return fig


def attention_png_bytes(
    attention,
    source_words,
    headline_words,
    title=None,
    *,
    dpi=100,
):
    """Renders an attention heatmap to PNG bytes (e.g. for an HTTP response).

    Args:
        attention: float array of shape `[T, S]`: row `i` is the attention of
            headline word `i` over the source words.
        source_words: `S` source words (`str` or `bytes`); `""` is padding.
        headline_words: `T` headline words; `""` is padding.
        title: optional title above the heatmap.
        dpi: resolution of the PNG.

    Returns:
        The PNG file contents as `bytes`.
    """
    fig = _render(attention, source_words, headline_words, title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def plot_attention(
    attention,
    source_words,
    headline_words,
    path,
    title=None,
    *,
    dpi=100,
):
    """Writes an attention heatmap as a PNG file.

    Headline words are the rows and source words the columns; padding words
    (`""`) and their rows/columns are trimmed, and the figure is sized to the
    remaining token counts.

    Args:
        attention: float array of shape `[T, S]`.
        source_words: `S` source words (`str` or `bytes`); `""` is padding.
        headline_words: `T` headline words; `""` is padding.
        path: where to write the PNG (parent folders are created).
        title: optional title above the heatmap.
        dpi: resolution of the PNG.

    Returns:
        `path` as a string.
    """
    data = attention_png_bytes(attention, source_words, headline_words, title, dpi=dpi)
    path = os.fspath(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def plot_examples(examples, titles, folder):
    """Writes `folder/example_<i>.png`, one heatmap per example.

    Args:
        examples: Per-document dictionaries with the `attention` signature's
            `attention` (`[T, S]`), `source_words` (`S`) and `headline_words`
            (`T`), e.g. from `models.decoding.saved_model_client.decode_outputs`.
        titles: One title per example.
        folder: The folder written into (created when missing).

    Returns:
        The paths written, in order.
    """
    return [
        plot_attention(
            example["attention"],
            example["source_words"],
            example["headline_words"],
            os.path.join(folder, f"example_{i}.png"),
            title=title,
        )
        for i, (example, title) in enumerate(zip(examples, titles, strict=True))
    ]
