"""Is one export faster than another? Paired calls over many test batches.

`bench_decoding.py` times its programs on the first documents of the test
split, in rounds beside the tutorial loop. This compares two exports of the
same model alone, on consecutive batches of the test documents (each batch a
new set of lengths), each batch called `--pairs` times by both, one after the
other; it prints each one's median time per call, the cores it kept busy
(the process's CPU time over the wall time, summed over its calls) and the
median of the paired ratios (first / second: above 1 when the second is
faster). Each shape is called once by both before it is timed (XLA compiles
it then).

    python -m benchmarks.paired_exports saved_models/headlines_ema1/12 \\
        saved_models/headlines_ema1/14 \\
        --data-dir ../shared/data/gigaword_sample --batch-size 64
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("first", help="SavedModel folder (a version folder)")
    p.add_argument("second", help="SavedModel folder to compare with")
    p.add_argument("--data-dir", required=True, help="folder holding org_data/")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--pairs", type=int, default=3, help="paired calls per batch")
    p.add_argument("--signature", default="greedy")
    return p.parse_args(argv)


def median(values):
    return sorted(values)[len(values) // 2]


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf

    from benchmarks.common import machine_info

    path = Path(args.data_dir) / "org_data" / "test.src.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    from models.decoding.saved_model_client import get_signature

    first, second = (
        get_signature(d, args.signature) for d in (args.first, args.second)
    )

    cpu = {args.first: 0.0, args.second: 0.0}

    def seconds(fn, docs, name=None):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn(documents=docs)["headlines"].numpy()
        if name:
            cpu[name] += time.process_time() - start_cpu
        return time.perf_counter() - start

    times = {args.first: [], args.second: []}
    ratios = []
    for b in range(args.batches):
        docs = tf.constant(lines[b * args.batch_size : (b + 1) * args.batch_size])
        if not docs.shape[0]:
            break
        seconds(first, docs), seconds(second, docs)
        for _ in range(args.pairs):
            a = seconds(first, docs, args.first)
            c = seconds(second, docs, args.second)
            times[args.first].append(a)
            times[args.second].append(c)
            ratios.append(a / c)
    print(machine_info())
    for name, values in times.items():
        print(
            f"{name}: {1000 * median(values):.1f} ms per call (median), "
            f"{cpu[name] / sum(values):.2f} cores busy"
        )
    print(
        f"{args.signature}, batch {args.batch_size}: first / second, median of "
        f"{len(ratios)} pairs: {median(ratios):.3f}"
    )


if __name__ == "__main__":
    main()
