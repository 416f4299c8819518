"""Do two exported SavedModels write the same headlines?

Runs every headline signature of both exports (`serving_default`, the beam
search, and `greedy`) on the same documents, one per line of a text file,
and prints per signature: identical headlines, documents, and the largest
absolute score difference. Meant for an export of the same weights by two
versions of the code (a new search, say).

    python -m benchmarks.compare_exports saved_models/a/1 saved_models/b/1 \
        ../shared/data/gigaword_sample/org_data/test.src.txt

Exit status 1 when any headline differs.
"""

from __future__ import annotations

import argparse
import sys

SIGNATURES = ("serving_default", "greedy")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("old", help="SavedModel folder (a version folder)")
    p.add_argument("new", help="SavedModel folder to compare with")
    p.add_argument("documents", help="text file, one document per line")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--limit", type=int, default=None, help="first N documents")
    p.add_argument("--show", type=int, default=3, help="differences printed")
    p.add_argument(
        "--readable",
        action="store_true",
        help="compare the readable `headlines`, not the model's tokens",
    )
    return p.parse_args(argv)


def run_signature(model, name, documents, batch_size, readable=False):
    """`(headlines, scores)` of signature `name`, as lists."""
    from models.decoding.saved_model_client import decode_outputs

    key = "headlines" if readable else "normalized_headlines"
    records = decode_outputs(
        model,
        documents,
        signature=name,
        outputs=(key, "scores"),
        batch_size=batch_size,
        progress=False,
    )
    return [r[key] for r in records], [float(r["scores"]) for r in records]


def compare(old, new, documents, batch_size=128, readable=False):
    """Per signature: `{"identical", "documents", "max_score_diff", "diffs"}`."""
    from models.decoding.saved_model_client import load_saved_model

    models = load_saved_model(old), load_saved_model(new)
    report = {}
    for name in SIGNATURES:
        (h_old, s_old), (h_new, s_new) = (
            run_signature(m, name, documents, batch_size, readable) for m in models
        )
        diffs = [i for i, (a, b) in enumerate(zip(h_old, h_new, strict=True)) if a != b]
        report[name] = {
            "identical": len(documents) - len(diffs),
            "documents": len(documents),
            "max_score_diff": max(
                (abs(a - b) for a, b in zip(s_old, s_new, strict=True)), default=0.0
            ),
            "diffs": [(i, h_old[i], h_new[i]) for i in diffs],
        }
    return report


def main(argv=None):
    args = parse_args(argv)
    with open(args.documents, encoding="utf-8") as f:
        documents = [line.rstrip("\n") for line in f]
    documents = documents[: args.limit]
    report = compare(args.old, args.new, documents, args.batch_size, args.readable)
    for name, r in report.items():
        print(
            f"{name}: {r['identical']}/{r['documents']} identical headlines, "
            f"max |score difference| {r['max_score_diff']:.3g}"
        )
        for i, a, b in r["diffs"][: args.show]:
            print(f"  #{i}\n    old: {a}\n    new: {b}")
    return 0 if all(not r["diffs"] for r in report.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
