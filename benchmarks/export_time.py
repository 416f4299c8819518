"""How long does exporting a trained run take, by one version of the code?

Times `models.export.export_run` (load the run, trace the signatures, write
the SavedModel) in one process, `--repeats` times, each into a new folder,
and prints each time with the min / median / max. `--code` names the
checkout whose `models/` is imported, so that two versions of the code can
be timed on the same run, one after the other:

    git worktree add /tmp/old <commit>
    for code in /tmp/old .; do
        python benchmarks/export_time.py --run-dir runs/headlines --code "$code"
    done

The first export of a process pays for loading TensorFlow's tracing
machinery as well; it is printed but left out of the summary.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run-dir", type=Path, required=True, help="a trained run")
    p.add_argument("--code", type=Path, default=Path("."), help="the checkout")
    p.add_argument("--repeats", type=int, default=4, help="exports timed")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.repeats < 2:
        raise SystemExit(f"`--repeats` must be >= 2. Received: {args.repeats}")
    sys.path.insert(0, str(args.code.resolve()))
    from common import machine_info

    from models.export import export_run

    seconds = []
    with tempfile.TemporaryDirectory() as folder:
        for i in range(args.repeats):
            start = time.perf_counter()
            export_run(args.run_dir, Path(folder) / str(i))
            seconds.append(time.perf_counter() - start)
            print(f"export {i + 1}: {seconds[-1]:.2f} s", flush=True)
    timed = seconds[1:]
    print(
        f"code {args.code.resolve()}: exports 2-{args.repeats} "
        f"min {min(timed):.2f} / median {statistics.median(timed):.2f} / "
        f"max {max(timed):.2f} s"
    )
    print({k: v for k, v in machine_info().items() if k in ("Model name", "simd")})


if __name__ == "__main__":
    main()
