"""Where an export's call goes, op by op, from the TensorFlow profiler.

Calls one signature of a SavedModel on the first `--batch` test documents,
records `--calls` calls with `tf.profiler`, and reads the trace (the
`.xplane.pb` protobuf, no TensorBoard needed). Prints, per call: the time
the ops ran summed over TensorFlow's threads against the wall time, then the
op types and the single nodes that took the most. A node inside the search
loop runs once a step (`while/body` in its name), so its count per call is
the number of steps.

    python benchmarks/op_profile.py saved_models/headlines/1 \\
        --data-dir ../shared/data/gigaword_sample --signature greedy
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("model_dir", help="SavedModel folder (a version folder)")
    p.add_argument("--data-dir", required=True, help="folder holding org_data/")
    p.add_argument("--signature", default="greedy")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--calls", type=int, default=3, help="calls recorded")
    p.add_argument("--top", type=int, default=25, help="rows of each table")
    return p.parse_args(argv)


def op_events(xplane_path):
    """`(node name, op type, seconds)` of every op the trace recorded."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(xplane_path).read_bytes())
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                node, _, op = name.rpartition(":")
                # Op events are "node:Type" (oneDNN's types start with
                # `_Mkl`); the executor's own scopes (`Process`, `Run`) and
                # Python's frames are not ops.
                is_op = op[:1].isupper() or op.startswith("_Mkl")
                if node and is_op and op not in ("Process", "Run"):
                    yield node, op, event.duration_ps * 1e-12


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf
    from common import machine_info

    print(machine_info())
    path = Path(args.data_dir) / "org_data" / "test.src.txt"
    documents = tf.constant(path.read_text(encoding="utf-8").splitlines()[: args.batch])
    function = tf.saved_model.load(args.model_dir).signatures[args.signature]
    for _ in range(3):
        function(documents)
    logdir = tempfile.mkdtemp(prefix="op_profile_")
    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    for _ in range(args.calls):
        function(documents)
    wall = (time.perf_counter() - start) / args.calls
    tf.profiler.experimental.stop()
    (trace,) = Path(logdir).rglob("*.xplane.pb")

    by_op = collections.defaultdict(lambda: [0, 0.0])
    by_node = collections.defaultdict(lambda: [0, 0.0])
    for node, op, seconds in op_events(trace):
        for table, key in ((by_op, op), (by_node, f"{node} ({op})")):
            table[key][0] += 1
            table[key][1] += seconds
    n = args.calls
    total = sum(t for _, t in by_op.values())
    print(
        f"{args.signature}, batch {args.batch}: {wall * 1e3:.1f} ms a call "
        f"(profiled); ops ran {total / n * 1e3:.1f} ms a call summed over "
        f"threads, {sum(c for c, _ in by_op.values()) / n:.0f} ops a call"
    )
    for title, table in (("op type", by_op), ("node", by_node)):
        print(f"\n{title:>70} | per call | ms a call | us each")
        rows = sorted(table.items(), key=lambda kv: -kv[1][1])[: args.top]
        for key, (count, seconds) in rows:
            key = key if len(key) <= 70 else "..." + key[-67:]
            print(
                f"{key:>70} | {count / n:8.0f} | {seconds / n * 1e3:9.2f} | "
                f"{seconds / count * 1e6:7.1f}"
            )


if __name__ == "__main__":
    main()
