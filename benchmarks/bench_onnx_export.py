"""ONNX Runtime against the SavedModel: the same export, the same test pairs.

The SavedModel's `serving_default` (text in, headlines out, TensorFlow) and
its ids-level ONNX export run by `serving.onnx_client.OnnxSummarizer` (the
text steps in Python, the search in ONNX Runtime), in one process, on the
first `--limit` pairs of the test split:

* headlines/s at batch `--batch-size` (64), each runtime over all pairs,
  after a warm-up batch; and the ONNX search alone (the ids encoded
  beforehand), which shows what the Python text steps cost;
* latency p50 / p99 at batch 1 over the first `--latency-documents`
  documents, the two runtimes interleaved document by document;
* ROUGE F1 of each (`models.scoring.metrics.mean_rouge`, the model's
  normalized tokens against the references, as evaluation scores them),
  and how many headlines are the same.

    python -m benchmarks.bench_onnx_export --export-dir saved_models/headlines/1 \
        --data-dir ../shared/data/gigaword_sample --output onnx.json

`--export-dir` is a SavedModel version folder, which holds its trained
models: the ONNX export is written from it to a temporary folder (or taken
from `--onnx-dir`). The JSON holds the figures and `machine_info()`.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--export-dir", required=True, help="a SavedModel version folder")
    p.add_argument(
        "--data-dir", required=True, help="holding org_data/test.{src,tgt}.txt"
    )
    p.add_argument("--output", required=True, help="the JSON written")
    p.add_argument("--onnx-dir", default=None, help="its ONNX export's folder")
    p.add_argument("--limit", type=int, default=None, help="first N test pairs")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--latency-documents", type=int, default=100)
    return p.parse_args(argv)


def test_pairs(data_dir, limit=None):
    """`(documents, references)` of the test split, the first `limit`."""
    folder = Path(data_dir) / "org_data"
    pairs = [
        (folder / f"test.{side}.txt").read_text(encoding="utf-8").splitlines()
        for side in ("src", "tgt")
    ]
    return [side[:limit] for side in pairs]


def onnx_export(export_dir, folder):
    """The ONNX export of the SavedModel version folder `export_dir` (its
    trained models, its search options), written under `folder`."""
    from models.export.saved_model import export_run

    return export_run(export_dir, folder, format="onnx")


def saved_model_runner(export_dir):
    """`run(documents) -> normalized headlines` of `serving_default`."""
    import tensorflow as tf

    serve = tf.saved_model.load(str(export_dir)).signatures["serving_default"]

    def run(documents):
        out = serve(documents=tf.constant(documents))
        return [h.decode() for h in out["normalized_headlines"].numpy().tolist()]

    return run


def onnx_runner(summarizer):
    def run(documents):
        return summarizer(documents)["normalized_headlines"]

    return run


def throughput(run, documents, batch_size):
    """`(headlines/s, headlines)` over `documents` in batches, after one
    warm-up batch."""
    batches = [
        documents[i : i + batch_size] for i in range(0, len(documents), batch_size)
    ]
    run(batches[0])
    start = time.perf_counter()
    headlines = [h for batch in batches for h in run(batch)]
    return len(documents) / (time.perf_counter() - start), headlines


def search_throughput(summarizer, documents, batch_size):
    """Headlines/s of the ONNX search alone: ids encoded beforehand."""
    encoded = [
        summarizer.text.encode(documents[i : i + batch_size])[:2]
        for i in range(0, len(documents), batch_size)
    ]
    summarizer.search_ids(*encoded[0])
    start = time.perf_counter()
    for ids, lengths in encoded:
        summarizer.search_ids(ids, lengths)
    return len(documents) / (time.perf_counter() - start)


def latencies(runs, documents):
    """`{name: {"p50_ms", "p99_ms"}}` at batch 1, the runs interleaved."""
    import numpy as np

    times = {name: [] for name in runs}
    for run in runs.values():
        run(documents[:1])
    for document in documents:
        for name, run in runs.items():
            start = time.perf_counter()
            run([document])
            times[name].append(1000 * (time.perf_counter() - start))
    return {
        name: {
            "p50_ms": float(np.percentile(t, 50)),
            "p99_ms": float(np.percentile(t, 99)),
        }
        for name, t in times.items()
    }


def measure(args, onnx_dir):
    from benchmarks.common import machine_info
    from models.scoring.metrics import mean_rouge
    from serving.onnx_client import OnnxSummarizer

    documents, references = test_pairs(args.data_dir, args.limit)
    summarizer = OnnxSummarizer(onnx_dir)
    runs = {
        "saved_model": saved_model_runner(args.export_dir),
        "onnx": onnx_runner(summarizer),
    }
    report = {"export_dir": str(args.export_dir), "pairs": len(documents)}
    headlines = {}
    for name, run in runs.items():
        rate, headlines[name] = throughput(run, documents, args.batch_size)
        report[name] = {
            f"headlines_per_s_batch_{args.batch_size}": rate,
            "rouge": mean_rouge(headlines[name], references),
        }
    report["onnx"][f"search_only_headlines_per_s_batch_{args.batch_size}"] = (
        search_throughput(summarizer, documents, args.batch_size)
    )
    for name, figures in latencies(runs, documents[: args.latency_documents]).items():
        report[name]["batch_1"] = figures
    report["same_headlines"] = sum(
        a == b for a, b in zip(headlines["saved_model"], headlines["onnx"], strict=True)
    )
    key = f"headlines_per_s_batch_{args.batch_size}"
    report["onnx_over_saved_model"] = {
        key: report["onnx"][key] / report["saved_model"][key],
        "batch_1_p50": report["onnx"]["batch_1"]["p50_ms"]
        / report["saved_model"]["batch_1"]["p50_ms"],
    }
    report["machine"] = machine_info()
    return report


def main(argv=None):
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        onnx_dir = args.onnx_dir or onnx_export(args.export_dir, folder)
        report = measure(args, onnx_dir)
    Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
