"""The TSP training labels above n = 10, scored against Held-Karp's optimum.

A Ptr-Net learns to imitate its labels, so it can only come as close to the
optimum as they are. Above n = 10 the labels come from a local search
(`examples.planar_problems.tsp_targets`); this scores each kind on the
runner's own n = 20 test set (its Held-Karp lengths are cached beside the
checkpoints) and on `--sizes` more sizes, with the CPU time per 1,000
instances.

```
python -m benchmarks.tsp_labels --sizes 11 15 \\
    --results benchmarks/results/tsp_labels.jsonl
```

Prints one markdown row per kind of label and size.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import paper_units
from benchmarks.paper_runs import CHECKPOINTS, append_result, provenance
from examples import planar_problems


def test_sets(sizes, count, cache_dir):
    """`[(n, points, optimal lengths)]`: the runner's TSP test sets above
    n = 10, then `count` instances of each of `sizes`."""
    (unit,) = paper_units.pointer_units(["tsp-5-20-or-opt"], [0])
    sets = [
        (g["n"], g["points"], g["ref"])
        for g in paper_units.pointer_test_groups(unit, cache_dir)
        if g["n"] > planar_problems.HELD_KARP_MAX_N
    ]
    for n in sizes:
        points = planar_problems.make_points(count, n, seed=20_000 + n)
        name = f"labels_tsp{n}_x{count}"
        sets.append((n, points, paper_units.tsp_reference(points, cache_dir, name)))
    return sets


def score(labels, points, optimum):
    """The label tours' gap to `optimum` and their CPU time."""
    start = time.process_time()
    lengths = planar_problems.tsp_targets(points, labels)[1]
    seconds = time.process_time() - start
    ratio = lengths / optimum
    return {
        "labels": labels,
        "count": len(points),
        "tour_length": float(lengths.mean()),
        "reference_length": float(optimum.mean()),
        "gap_percent": float(100 * (lengths.mean() / optimum.mean() - 1)),
        "max_gap_percent": float(100 * (ratio.max() - 1)),
        "optimal_share": float(np.mean(ratio < 1 + 1e-9)),
        "cpu_seconds_per_1000": 1000 * seconds / len(points),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[11, 15])
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--cache", type=Path, default=CHECKPOINTS)
    parser.add_argument("--results", type=Path, help="a JSON-lines file to append to")
    args = parser.parse_args(argv)
    if any(n <= planar_problems.HELD_KARP_MAX_N for n in args.sizes):
        parser.error(
            f"--sizes must be above {planar_problems.HELD_KARP_MAX_N}, where the "
            f"labels are Held-Karp's own. Received: --sizes {args.sizes}"
        )
    context = {
        **provenance(sys.argv[1:] if argv is None else argv, "benchmarks.tsp_labels"),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print("| labels | n | instances | gap | worst | optimal | CPU s / 1000 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for n, points, optimum in test_sets(args.sizes, args.count, args.cache):
        for labels in planar_problems.TSP_LABELS:
            row = {"n": n, **score(labels, points, optimum)}
            print(
                f"| {labels} | {n} | {row['count']} | {row['gap_percent']:.3f}% | "
                f"{row['max_gap_percent']:.2f}% | {100 * row['optimal_share']:.1f}% "
                f"| {row['cpu_seconds_per_1000']:.1f} |",
                flush=True,
            )
            if args.results:
                append_result(args.results, {**row, **context})


if __name__ == "__main__":
    main()
