"""One training step of the summarizer with and without XLA, at fixed shapes.

`train.py` batches by length buckets, so its shapes change from step to step
and XLA (`jit_compile=True`) would compile again for each. This measures the
best case for XLA, one fixed `(batch, S, T)` shape compiled once, to see
whether bucketing to fixed shapes would be worth it on this CPU.

    python benchmarks/bench_xla_step.py --source-length 32 --target-length 20
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default=str(REPO / "runs/headlines/config.json"))
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--source-length", type=int, default=32)
    p.add_argument("--target-length", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--number", type=int, default=3, help="steps per timing")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    import numpy as np
    from common import interleaved, machine_info, markdown_table, median_ratio

    from models.config import SummarizerConfig, TrainOptions
    from models.training import build_model

    path = Path(args.config)
    config = (
        SummarizerConfig.from_dict(json.loads(path.read_text()))
        if path.exists()
        else SummarizerConfig()
    )
    rng = np.random.default_rng(0)
    shape_s = (args.batch_size, args.source_length)
    shape_t = (args.batch_size, args.target_length)
    source = rng.integers(4, config.vocab_size, shape_s).astype("int32")
    target = rng.integers(4, config.vocab_size, shape_t).astype("int32")
    x = {"source_ids": source, "source_ext_ids": source, "target_in": target}
    programs = {}
    for jit in (False, True):
        model = build_model(config, TrainOptions(jit_compile=jit))
        programs["xla" if jit else "tf.function"] = lambda m=model: m.train_on_batch(
            x, target
        )
    print(machine_info())
    times = interleaved(programs, repeats=args.repeats, number=args.number, warmup=2)
    rows = [
        [
            name,
            f"{1000 * sorted(t)[len(t) // 2]:.0f}",
            f"{median_ratio(times, name, 'tf.function'):.2f}",
        ]
        for name, t in times.items()
    ]
    print(f"batch {args.batch_size}, S {args.source_length}, T {args.target_length}")
    print(markdown_table(["program", "ms/step (median)", "time vs tf.function"], rows))


if __name__ == "__main__":
    main()
