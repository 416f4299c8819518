"""How many row-steps a greedy search computes, by how it drops ended rows.

Decodes test documents with an export's `greedy` signature, in batches, and
counts from each headline's length (its end token included) the rows that
each step of a batch computes:

* `none`: every row until the batch's longest headline ends;
* `rows` (`drop_finished=True`): only the open rows;
* `halves` (`drop_finished="halves"`): the batch halved each time half its
  rows have ended (the XLA export's search).

    python benchmarks/row_steps.py --model-dir saved_models/headlines_ema1/2 \\
        --data-dir ../shared/data/gigaword_sample
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model-dir", required=True, help="a SavedModel version folder")
    p.add_argument("--data-dir", required=True, help="folder holding org_data/")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--documents", type=int, default=1920)
    p.add_argument("--max-length", type=int, default=20)
    return p.parse_args(argv)


def row_steps(lengths, max_length):
    """`(none, rows, halves)` row-steps for one batch's headline lengths."""
    steps = min(max(lengths), max_length)
    none = len(lengths) * steps
    rows = sum(min(n, max_length) for n in lengths)
    halves, size = 0, len(lengths)
    for t in range(steps):
        still_open = sum(n > t for n in lengths)
        while size > 1 and still_open <= size // 2:
            size //= 2
        halves += size
    return none, rows, halves


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf

    greedy = tf.saved_model.load(args.model_dir).signatures["greedy"]
    source = Path(args.data_dir) / "org_data" / "test.src.txt"
    docs = source.read_text().splitlines()[: args.documents]
    totals = [0, 0, 0]
    for start in range(0, len(docs), args.batch):
        out = greedy(documents=tf.constant(docs[start : start + args.batch]))
        # Its words and the end token.
        lengths = [len(h.split()) + 1 for h in out["normalized_headlines"].numpy()]
        for i, n in enumerate(row_steps(lengths, args.max_length)):
            totals[i] += n
    none, rows, halves = totals
    print(f"{len(docs)} documents in batches of {args.batch}: row-steps")
    print(
        f"none {none}, rows {rows} ({none / rows:.2f}x fewer than none), "
        f"halves {halves} ({none / halves:.2f}x fewer)"
    )


if __name__ == "__main__":
    main()
