"""The cost and quality of each way to serve a headline, side by side.

For each system (an export and one of its signatures): test ROUGE-1/2/L
with 95% intervals (read from the export's `metrics.json`, which
`train.py` or `python -m models.evaluation` writes), headlines/s at batch 64,
latency at batch 1 (p50/p99), GFLOP per headline (`flops.py`, counted on
the headlines it wrote) and requests/s of `serving` under 32
closed-loop clients (`load_test.py`), all in one run on one machine. The
decoding timings interleave the systems round by round (`common.py`), so a
drift of the machine's load hits them alike.

```
python -m benchmarks.bench_distill --data-dir ../shared/data/gigaword_sample \
    --system "ensemble, beam 5=saved_models/headlines/1:serving_default" \
    --system "ensemble, greedy=saved_models/headlines/1:greedy" \
    --system "student, greedy=saved_models/student/1:greedy" \
    --json-out benchmarks/results/distill.json
```

A system is `NAME=VERSION_DIR:SIGNATURE` (`serving_default` is the
export's beam search, `greedy` greedy search).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import interleaved, machine_info, markdown_table
from benchmarks.flops import search_flops
from models.settings.folder_layout import (
    CONFIG_FILE,
    METRICS_FILE,
    SEARCH_OPTIONS_FILE,
)

ROOT = Path(__file__).resolve().parents[1]
METRICS_SYSTEM = {"serving_default": "beam", "greedy": "greedy"}


def parse_system(spec):
    name, _, target = spec.partition("=")
    folder, _, signature = target.rpartition(":")
    if not (name and folder and signature in METRICS_SYSTEM):
        raise SystemExit(
            "error: --system must be NAME=VERSION_DIR:SIGNATURE with SIGNATURE "
            f"serving_default or greedy. Received: --system={spec!r}"
        )
    return {"name": name, "dir": Path(folder), "signature": signature}


def rouge(system):
    """The export's test ROUGE of this signature, `{metric: (f1, low, high)}`."""
    metrics = json.loads((system["dir"] / METRICS_FILE).read_text())
    scores = metrics["systems"][METRICS_SYSTEM[system["signature"]]]
    return {
        m: (scores[m]["f1"], scores[m]["low"], scores[m]["high"])
        for m in ("rouge1", "rouge2", "rougeL")
    }


def gflop_per_headline(system, saved, documents):
    """FLOPs of decoding `documents`, counted on the headlines written."""
    from models.model.run_folder import model_files
    from models.settings.model import SummarizerConfig
    from models.settings.search import SearchOptions

    config = SummarizerConfig.load(system["dir"] / CONFIG_FILE)
    options = SearchOptions(
        **json.loads((system["dir"] / SEARCH_OPTIONS_FILE).read_text())
    )
    members = len(model_files(system["dir"]))
    out = saved.signatures["attention"](documents=documents)
    source_lengths = np.sum(out["source_tokens"].numpy() != b"", axis=1)
    headlines = saved.signatures[system["signature"]](documents=documents)
    tokens = [len(h.split()) for h in headlines["normalized_headlines"].numpy()]
    steps = [min(n + 1, options.max_length) for n in tokens]
    rows = options.beam_size if system["signature"] == "serving_default" else 1
    counts = search_flops(
        config, source_lengths, steps, beam_size=rows, shortlist=options.shortlist
    )
    return members * counts["total"] / len(tokens) / 1e9


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def served_requests_per_s(system, documents_file, duration, concurrency, warmup):
    """`load_test.py`'s requests/s against `serving` of this export,
    after `warmup` seconds of the same load (not counted): an XLA export
    compiles each new batch and source shape on its first call."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as scratch:
        # The server serves a folder of versions: this one alone.
        (Path(scratch) / "1").symlink_to(system["dir"].resolve())
        server = subprocess.Popen(
            [sys.executable, "-m", "serving", "--model-dir", scratch]
            + ["--port", str(port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_until_ready(port, server)
            report = Path(scratch) / "report.json"
            for seconds in ([warmup] if warmup > 0 else []) + [duration]:
                subprocess.run(
                    [sys.executable, "-m", "benchmarks.load_test"]
                    + ["--url", f"http://127.0.0.1:{port}", "--concurrency"]
                    + [str(concurrency), "--duration", str(seconds), "--signature"]
                    + [system["signature"], "--documents-file", str(documents_file)]
                    + ["--json-out", str(report)],
                    check=True,
                    cwd=ROOT,
                    stdout=subprocess.DEVNULL,
                )
            return json.loads(report.read_text())["throughput_rps"]
        finally:
            server.terminate()
            server.wait()


def _wait_until_ready(port, server, timeout_s=300):
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"error: the server exited with {server.returncode}")
        try:
            url = f"http://127.0.0.1:{port}/v1/models/headlines"
            with urllib.request.urlopen(url, timeout=2) as response:
                if b"AVAILABLE" in response.read():
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("error: the server did not load the model in time")


def decoding_speed(systems, loaded, documents, batches, rounds, latency_documents):
    """Headlines/s at batch 64 and batch-1 latencies, interleaved."""
    import tensorflow as tf

    batch = [tf.constant(documents[i * 64 : (i + 1) * 64]) for i in range(batches)]
    programs = {}
    for s in systems:
        fn = loaded[s["name"]].signatures[s["signature"]]
        programs[s["name"]] = lambda fn=fn: [fn(documents=b) for b in batch]
    times = interleaved(programs, repeats=rounds, number=1, warmup=1)
    ones = [tf.constant([d]) for d in documents[:latency_documents]]
    for one in ones:  # each new shape compiles here under XLA, not timed
        for s in systems:
            loaded[s["name"]].signatures[s["signature"]](documents=one)
    latencies = {s["name"]: [] for s in systems}
    for one in ones:
        for s in systems:
            fn = loaded[s["name"]].signatures[s["signature"]]
            start = time.perf_counter()
            fn(documents=one)
            latencies[s["name"]].append(time.perf_counter() - start)
    return {
        s["name"]: {
            "headlines_per_s": 64 * batches / statistics.median(times[s["name"]]),
            "latency_ms_p50": 1000 * float(np.percentile(latencies[s["name"]], 50)),
            "latency_ms_p99": 1000 * float(np.percentile(latencies[s["name"]], 99)),
            # What a peer that reports only an average (onmt_translate's
            # `-report_time`) is compared with.
            "latency_ms_mean": 1000 * statistics.mean(latencies[s["name"]]),
        }
        for s in systems
    }


def _table(results):
    header = [
        "system",
        "ROUGE-1 [95%]",
        "ROUGE-2",
        "ROUGE-L",
        "headlines/s, batch 64",
        "latency p50 / p99 ms, batch 1",
        "GFLOP / headline",
        "served req/s, 32 clients",
    ]
    rows = []
    for r in results:
        r1, r2, rl = (r["rouge"][m] for m in ("rouge1", "rouge2", "rougeL"))
        rows.append(
            [
                r["name"],
                f"{r1[0]:.2f} [{r1[1]:.2f}, {r1[2]:.2f}]",
                f"{r2[0]:.2f}",
                f"{rl[0]:.2f}",
                f"{r['headlines_per_s']:.1f}",
                f"{r['latency_ms_p50']:.1f} / {r['latency_ms_p99']:.1f}",
                f"{r['gflop_per_headline']:.3f}",
                "" if r["served_rps"] is None else f"{r['served_rps']:.1f}",
            ]
        )
    return markdown_table(header, rows)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--system", action="append", required=True, type=parse_system)
    p.add_argument("--data-dir", required=True, help="the org_data folder's parent")
    p.add_argument("--batches", type=int, default=8, help="test batches of 64")
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--latency-documents", type=int, default=200)
    p.add_argument("--serve-seconds", type=float, default=30.0)
    p.add_argument(
        "--serve-warmup-seconds",
        type=float,
        default=15.0,
        help="load before the timed seconds, not counted (XLA compiles then)",
    )
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--no-serve", action="store_true", help="skip the served req/s")
    p.add_argument("--json-out", help="append the results (one JSON line)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    from models.decoding.saved_model_client import load_saved_model

    source = Path(args.data_dir) / "org_data" / "test.src.txt"
    test = source.read_text(encoding="utf-8").splitlines()
    machine = machine_info()
    print(f"machine: {machine}", file=sys.stderr)
    systems = args.system
    loaded = {s["name"]: load_saved_model(s["dir"]) for s in systems}
    speed = decoding_speed(
        systems,
        loaded,
        test[: 64 * args.batches],
        args.batches,
        args.rounds,
        args.latency_documents,
    )
    speed_docs = tf.constant(test[: 64 * args.batches])
    results = []
    for s in systems:
        results.append(
            {
                "name": s["name"],
                "export": str(s["dir"]),
                "signature": s["signature"],
                "rouge": rouge(s),
                **speed[s["name"]],
                "gflop_per_headline": gflop_per_headline(
                    s, loaded[s["name"]], speed_docs
                ),
                "served_rps": None,
            }
        )
    if not args.no_serve:
        del loaded  # the servers need the memory and the cores
        for r, s in zip(results, systems, strict=True):
            r["served_rps"] = served_requests_per_s(
                s,
                source,
                args.serve_seconds,
                args.concurrency,
                args.serve_warmup_seconds,
            )
            print(f"{s['name']}: {r['served_rps']} req/s", file=sys.stderr)
    print(_table(results))
    if args.json_out:
        record = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": machine,
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "results": results,
        }
        with open(args.json_out, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
