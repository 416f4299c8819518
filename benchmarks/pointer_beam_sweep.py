"""A trained Ptr-Net unit of `benchmarks.paper_runs`, decoded with several beams.

The paper's table decodes with a beam search over valid outputs; the runner
uses a beam of 5. This loads a unit's checkpoint (no training) and decodes
the runner's own test sets with each beam size given, so the table can say
how much of the gap to the paper a wider beam closes.

```
KERAS_BACKEND=jax nice -n 15 python -m benchmarks.pointer_beam_sweep \\
    --config tsp-5-20 --seed 0 --beams 1 5 10 20
```

Prints one markdown row per beam size and test `n`; with `--results`, also
appends them as JSON lines (with the machine, the command and the commit).
`benchmarks/tsp_labels.py` scores the training labels themselves.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from benchmarks import paper_units
from benchmarks.paper_runs import CHECKPOINTS, append_result, provenance
from examples import pointer_networks as ptrnet


def sweep(config, seed, beams, checkpoints):
    """`[(beam, n, metrics)]` of the unit's checkpoint decoded with `beams`."""
    (unit,) = paper_units.pointer_units([config], [seed])
    model, layer = ptrnet.build_model(
        unit["units"], unit["task"] == "tsp", "adam", unit["learning_rate"]
    )
    checkpoint = paper_units.Checkpoint(Path(checkpoints) / unit["unit"])
    state = checkpoint.load(model)
    if state is None:
        raise SystemExit(
            f"No checkpoint for {unit['unit']} under {checkpoints}: train it with "
            "`python -m benchmarks.paper_runs pointer` first. "
            f"Received: checkpoints={str(checkpoints)!r}"
        )
    groups = paper_units.pointer_test_groups(unit, checkpoints)
    rows = []
    for beam in beams:
        for n, metrics in ptrnet.evaluate(unit["task"], layer, groups, beam).items():
            rows.append((beam, n, metrics))
            print(_row(unit["task"], beam, n, metrics), flush=True)
    return unit, state, rows


def _row(task, beam, n, m):
    if task == "tsp":
        gap = 100 * (m["tour_length"] / m["reference_length"] - 1)
        quality = f"{m['tour_length']:.4f} | {m['reference_length']:.4f} | {gap:.2f}%"
    else:
        quality = f"{100 * m['accuracy']:.1f}% | {100 * m['not_simple']:.1f}%"
    return f"| {beam} | {n} | {quality} | {m['decode_seconds']:.1f} |"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", default="tsp-5-20", choices=sorted(paper_units.POINTER_CONFIGS)
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5, 10, 20])
    parser.add_argument("--checkpoints", type=Path, default=CHECKPOINTS)
    parser.add_argument("--results", type=Path, help="a JSON-lines file to append to")
    args = parser.parse_args(argv)
    task = paper_units.POINTER_CONFIGS[args.config]["task"]
    columns = ["beam", "n"]
    if task == "tsp":
        columns += ["tour", "optimum", "gap", "seconds"]
    else:
        columns += ["accuracy", "not simple", "seconds"]
    print("| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|")
    unit, state, rows = sweep(args.config, args.seed, args.beams, args.checkpoints)
    if args.results:
        context = {
            **provenance(
                sys.argv[1:] if argv is None else argv, "benchmarks.pointer_beam_sweep"
            ),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        for beam, n, metrics in rows:
            line = {"unit": unit["unit"], "epochs": state["epoch"], "beam": beam}
            append_result(args.results, {**line, "n": n, **metrics, **context})


if __name__ == "__main__":
    main()
