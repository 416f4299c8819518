"""Recurrent Entity Networks on the 20 bAbI tasks under a CPU budget per task.

Trains `examples/entity_networks.py`'s model on each task in turn, in one
process, each within `--minutes-per-task` of this process's CPU time
(`--clock cpu`, the default: independent of the other jobs on a shared
machine) or of wall-clock time (`--clock wall`); data loading, compiling
and every run count, and the first epoch always completes. It
writes the Markdown table of test errors beside the paper's
(Henaff et al. 2017, Table 2, bAbI 10k): per-task error, the number of
failed tasks (error above 5%) and the mean. The table is rewritten after
every task, so an interrupted run leaves the tasks done so far.

Usage:

```
nice -n 5 python -m benchmarks.babi_table --minutes-per-task 1.5 \
    --output examples/output/babi
python -m benchmarks.babi_table --tasks 1 4 --minutes-per-task 1
python -m benchmarks.babi_table --merge run_a/babi_results.json \
    run_b/babi_results.json --output examples/output/babi
```

The papers' full recipes, resumable over sessions, with results committed
as they come: `benchmarks/paper_runs.py`.
"""

import argparse
import json
import platform
import subprocess
import time
from pathlib import Path

import keras

from examples import entity_networks

# EntNet's test error (%) on bAbI 10k, tasks 1-20 (Henaff et al. 2017).
PAPER = (
    0,
    0.1,
    4.1,
    0,
    0.3,
    0.2,
    0,
    0.5,
    0.1,
    0.6,
    0.3,
    0,
    1.3,
    0,
    0,
    0.2,
    0.5,
    0.3,
    2.3,
    0,
)
FAILED_ABOVE = 5.0


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return platform.processor() or "unknown"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def summary(errors):
    """`(failed, mean)` of a list of errors in %."""
    failed = sum(e > FAILED_ABOVE for e in errors)
    return failed, sum(errors) / len(errors)


def settings_line(results):
    """The budget, runs, epochs, backend and CPU of `results`."""
    first = results[0]
    settings = first["settings"]
    return (
        f"budget {settings['minutes']:g} {first['clock']} min per task, "
        f"{settings['runs']} run(s), at most {settings['max_epochs']} epochs; "
        f"backend {first['backend']}; CPU {cpu_model()}"
    )


def markdown_table(results):
    """The Markdown table of `results` (one `run` dict per task)."""
    results = sorted(results, key=lambda r: r["task"])
    lines = [
        "| Task | Training set | Test error (%) | Paper (%) | Val. error (%) "
        f"| Epochs (best) | Seconds ({results[0]['clock'] if results else ''}) |",
        "|---:|:---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        best = r["runs"][r["best_run"]]
        lines.append(
            f"| {r['task']} | {r['subset']} ({r['n_train']} + {r['n_val']} val) "
            f"| {100 * r['test_error']:.1f} | {PAPER[r['task'] - 1]:.1f} "
            f"| {100 * r['val_error']:.1f} | {best['epochs']} ({best['best_epoch']}) "
            f"| {r['seconds']:.0f} |"
        )
    ours = [100 * r["test_error"] for r in results]
    paper = [PAPER[r["task"] - 1] for r in results]
    failed, mean = summary(ours)
    paper_failed, paper_mean = summary(paper)
    lines += [
        f"| **Failed (> {FAILED_ABOVE:g}%)** | | **{failed}** | {paper_failed} | | | |",
        f"| **Mean** | | **{mean:.1f}** | {paper_mean:.1f} | | | |",
        "",
        f"{len(results)} task(s); {settings_line(results)}",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=list(range(1, 21)))
    parser.add_argument("--minutes-per-task", type=float, default=1.5)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument(
        "--data-dir", type=Path, default=entity_networks.DEFAULT_DATA_DIR
    )
    parser.add_argument("--output", type=Path, default=Path("examples/output/babi"))
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        help="train nothing: write the table of these babi_results.json files "
        "(e.g. of runs that split the tasks between them)",
    )
    args = parser.parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    if args.merge:
        results = [r for path in args.merge for r in json.loads(path.read_text())]
        table = markdown_table(results)
        (args.output / "babi_table.md").write_text(table)
        print(table)
        return
    print(f"backend {keras.backend.backend()}; CPU {cpu_model()}", flush=True)
    results = []
    start = time.monotonic()
    for task in args.tasks:
        result = entity_networks.run(
            task=task,
            data_dir=args.data_dir,
            output=args.output,
            epochs=args.epochs,
            runs=args.runs,
            minutes=args.minutes_per_task,
            clock=args.clock,
            plot=False,
        )
        results.append(result)
        (args.output / "babi_table.md").write_text(markdown_table(results))
        (args.output / "babi_results.json").write_text(json.dumps(results, indent=2))
        print(f"[{time.monotonic() - start:.0f}s] task {task} done", flush=True)
    print(markdown_table(results))


if __name__ == "__main__":
    main()
