"""A Markdown table of served headlines next to their sources and references.

    python -m models.tools.headline_table --model-dir saved_models/headlines \
        --data-dir ../shared/data/gigaword_sample --n 10

Decodes the first `--n` documents of a split with the SavedModel's
`serving_default` signature and prints one row per document: the source
(shortened), the readable headline (`headlines`), the model's normalized
tokens (`normalized_headlines`, what ROUGE scores) and the reference.
"""

from __future__ import annotations

import html
import os

from models.settings.data import DataSource
from models.settings.flags import SettingsParser
from models.settings.version_folders import resolve_version_dir

os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def parse_args(argv=None):
    p = SettingsParser(
        prog="python -m models.tools.headline_table",
        description=__doc__.split("\n")[0],
    )
    p.add_argument("--model-dir", required=True, help="saved_models/<name>[/<version>]")
    p.add_argument("--data-dir", required=True, help="as for train.py")
    p.add_argument("--dataset", default="gigaword")
    p.add_argument("--tfds-dir", help="where TFDS keeps prepared datasets")
    p.add_argument("--split", default="test")
    p.add_argument("--n", type=int, default=10, help="documents")
    p.add_argument(
        "--source-chars", type=int, default=120, help="sources cut to this length"
    )
    return p.parse_args(argv)


def shorten(text, limit):
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def cell(text):
    """`text` as one Markdown table cell: `<unk>` shows, `|` splits nothing."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def table(sources, headlines, normalized, references, source_chars=120):
    """The Markdown table's lines."""
    lines = [
        "| # | source | headline | normalized tokens | reference |",
        "|---|---|---|---|---|",
    ]
    rows = zip(sources, headlines, normalized, references, strict=True)
    for i, (source, headline, tokens, reference) in enumerate(rows, 1):
        cells = (shorten(source, source_chars), headline, tokens, reference)
        lines.append(f"| {i} | " + " | ".join(cell(c) for c in cells) + " |")
    return lines


def main(argv=None):
    args = parse_args(argv)
    from models import data
    from models.decoding.saved_model_client import decode_outputs

    source = DataSource.for_model(
        resolve_version_dir(args.model_dir), args.dataset, args.data_dir, args.tfds_dir
    )
    pairs = data.load_split(args.split, source).take(args.n)
    sources, references = [], []
    for document, summary in pairs.as_numpy_iterator():
        sources.append(document.decode("utf-8"))
        references.append(summary.decode("utf-8"))
    records = decode_outputs(
        args.model_dir,
        sources,
        outputs=("headlines", "normalized_headlines"),
        progress=False,
    )
    headlines = [r["headlines"] for r in records]
    normalized = [r["normalized_headlines"] for r in records]
    rows = table(sources, headlines, normalized, references, args.source_chars)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
