"""The papers' recipes as a resumable runner: EntNet on bAbI, Ptr-Nets on hulls/TSP.

A *unit* is one training run of a paper's recipe: `(task, seed)` for bAbI,
`(configuration, seed)` for the Pointer Networks (`papers.units`). It is
defined by its epochs and examples, as the papers give them, so it trains
the same on any machine. Each visit of a unit appends one JSON line to a
results file in the repository (`papers/results/`, `papers.records`): the
test and validation errors, the epochs, CPU and wall seconds, the machine,
the command and the git commit.

Resuming: a unit's state (weights, optimizer, epoch, curve) is checkpointed
after every epoch under `--checkpoints` (default `papers/output/runs/`,
outside git). A new invocation skips `done` units and continues the others
from their last epoch, so a table fills over several invocations.
`--max-minutes` (no default) caps an invocation's wall time: the units it
stops are `partial`, and the next invocation goes on from there.

Rendering: `render` rewrites the tables between the markers
`<!-- results:babi:start -->` / `<!-- results:babi:end -->` (and
`convex_hull`, `tsp`) in README.md and every docs/**.md that has them, from
the results files alone (`papers.tables`).

```
# bAbI: tasks 16 and 19, seed 0, round-robin slices of 5 epochs, at most 80 minutes
nice -n 15 python -m papers.runner babi --tasks 16 19 --seeds 0 \\
    --slice-epochs 5 --max-minutes 80 --commit
# Pointer Networks, all configurations, on a GPU with JAX
KERAS_BACKEND=jax python -m papers.runner pointer --seeds 0
python -m papers.runner show      # print the tables, write nothing
python -m papers.runner render
```

Two runners may share the machine (two cores: `--tasks 1-10` and
`--tasks 11-20`); a lock file per unit keeps them off each other's units.
A GPU machine copies the bAbI data into the checkout (an ignored path such
as `papers/output/babi_data`) and passes `--data-dir`
(`papers/gpu_runs.sh`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from models.settings.flags import SettingsParser, check_flags
from papers import tables
from papers.records import (
    CHECKPOINTS,
    RESULTS,
    ROOT,
    append_result,
    commit_results,
    latest_by_unit,
    provenance,
    read_results,
)


def parse_range(text):
    """`"1-3"` -> [1, 2, 3]; `"4"` -> [4]."""
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(text)]


class Clock:
    """CPU and wall seconds since the start, and a wall-clock deadline."""

    def __init__(self, minutes=None):
        self.cpu, self.wall = time.process_time(), time.monotonic()
        self.deadline = None if minutes is None else self.wall + 60 * minutes

    def seconds(self):
        return time.process_time() - self.cpu, time.monotonic() - self.wall

    def expired(self):
        return self.deadline is not None and time.monotonic() > self.deadline


def run_units(units, results_path, train_unit, clock, slice_epochs=None, log=print):
    """Runs `units` round-robin until all are done or `clock` expires.

    Args:
        units: A list of dicts, each with a unique `unit` name (and whatever
            `train_unit` reads).
        results_path: The JSONL results file: `done` units are skipped.
        train_unit: `train_unit(unit, max_new_epochs, clock) -> line`, the
            unit's result line with `status` `done` or `partial`; it
            resumes from its own checkpoint. None: another process holds
            the unit, which this call then leaves alone.
        slice_epochs: At most this many epochs of a unit per visit (None:
            each unit to its end), so that several units advance together.

    Returns:
        The lines appended.
    """
    appended = []
    pending = list(units)
    while pending and not clock.expired():
        for unit in list(pending):
            latest = latest_by_unit(read_results(results_path))
            if _is_done(unit, latest.get(unit["unit"])) or _settled(unit, latest):
                pending.remove(unit)
                continue
            if clock.expired():
                break
            line = train_unit(unit, slice_epochs, clock)
            if line is None:  # another runner has it
                pending.remove(unit)
                continue
            append_result(results_path, line)
            appended.append(line)
            log(f"{line['unit']}: {line['status']}, {_brief(line)}")
            if line["status"] == "done":
                pending.remove(unit)
    return appended


def _is_done(unit, line):
    """Done by the recipe: a line done under a smaller `--max-epochs` is not."""
    if line is None or line["status"] != "done":
        return False
    return line["val_error"] == 0 or line["max_epochs"] >= unit["max_epochs"]


def _settled(unit, latest):
    """A bAbI task needs no more seeds once one run reached 0% validation."""
    group = unit.get("group")
    return group is not None and any(
        line.get("group") == group
        and line.get("status") == "done"
        and line.get("val_error") == 0
        and line["unit"] != unit["unit"]
        for line in latest.values()
    )


def _brief(line):
    if "val_metric" in line:
        val = f"{line['val_metric']} {line['val_error']:.4f}"
    else:
        val = f"val {100 * line['val_error']:.1f}%"
    return (
        f"{val}, test {_pct(line.get('test_error'))}, "
        f"{line['epochs']} epochs, {line['cpu_seconds']:.0f} CPU s"
    )


def _pct(value):
    return "-" if value is None else f"{100 * value:.1f}%"


def argument_parser():
    """The command line of `main`."""
    parser = SettingsParser(
        prog="python -m papers.runner", description=__doc__.split("\n")[0]
    )
    parser.add_argument("what", choices=["babi", "pointer", "render", "show"])
    parser.add_argument("--tasks", nargs="+", default=["1-20"], help="bAbI tasks")
    parser.add_argument(
        "--configs", nargs="+", default=None, help="Ptr-Net configurations"
    )
    parser.add_argument("--seeds", nargs="+", default=["0-9"])
    parser.add_argument("--max-epochs", type=int, default=None)
    parser.add_argument(
        "--clip",
        default="per-variable",
        help="bAbI: per-variable or summed-global (papers.units.babi_units)",
    )
    parser.add_argument(
        "--biases",
        action="store_true",
        help="bAbI: the memory's gate and candidate biases of the authors' code",
    )
    parser.add_argument(
        "--schedule",
        default="halving",
        help="bAbI: halving or cyclic (papers.units.babi_learning_rate)",
    )
    parser.add_argument(
        "--pad-to",
        type=int,
        default=None,
        help="Ptr-Nets: pad batches to multiples of this (one shape on a GPU: 50)",
    )
    parser.add_argument(
        "--lr-drop-epoch",
        type=int,
        nargs="+",
        default=(),
        help="Ptr-Nets: a tenth of the learning rate from each of these epochs "
        "(from 0) on",
    )
    parser.add_argument(
        "--data-workers",
        type=int,
        default=1,
        help="Ptr-Nets: processes that make the next epochs' examples (0: none)",
    )
    parser.add_argument("--slice-epochs", type=int, default=None)
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="stop starting epochs after this many wall minutes (no cap by default)",
    )
    parser.add_argument("--checkpoints", type=Path, default=CHECKPOINTS)
    parser.add_argument("--results", type=Path, default=None)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--commit", action="store_true", help="git commit results")
    parser.add_argument("--render", action="store_true", help="render after")
    return parser


def checked_args(parser, argv):
    """`argv` parsed by `parser`, each flag in its range (a bad one is one
    line and exit status 2), `tasks` and `seeds` read as lists of numbers."""
    args = parser.parse_args(argv)
    check_flags(
        parser,
        args,
        at_least={
            **dict.fromkeys(("max_epochs", "pad_to", "slice_epochs"), 1),
            **dict.fromkeys(("lr_drop_epoch", "data_workers"), 0),
        },
        above={"max_minutes": 0},
        folders=["data_dir"],
    )
    try:
        tasks = [t for text in args.tasks for t in parse_range(text)]
        seeds = [s for text in args.seeds for s in parse_range(text)]
    except ValueError:
        parser.error(
            "`--tasks` and `--seeds` must be numbers or ranges (1-3). "
            f"Received: --tasks={' '.join(args.tasks)} --seeds={' '.join(args.seeds)}"
        )
    args.tasks, args.seeds = tasks, seeds
    return args


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argument_parser()
    args = checked_args(parser, argv)
    if args.what == "show":  # the tables as they stand, nothing written
        pointer = read_results(RESULTS["pointer"])
        print(tables.babi_table(read_results(RESULTS["babi"])))
        print(tables.convex_hull_table(pointer))
        print(tables.tsp_table(pointer))
        return
    if args.what == "render":
        changed = tables.render_all(ROOT, RESULTS["babi"], RESULTS["pointer"])
        print("\n".join(str(p) for p in changed) or "no markers found")
        return
    # Keras and the models, only to train.
    from papers import units

    results_path = args.results or RESULTS[args.what]
    context = {**provenance(argv), "checkpoints": args.checkpoints}
    if args.what == "babi":
        try:
            todo = units.babi_units(
                args.tasks,
                args.seeds,
                args.max_epochs,
                args.data_dir,
                clip=args.clip,
                biases=args.biases,
                schedule=args.schedule,
            )
        except ValueError as error:
            parser.error(str(error))
    else:
        todo = units.pointer_units(
            args.configs,
            args.seeds,
            args.max_epochs,
            args.pad_to,
            args.lr_drop_epoch,
            args.data_workers,
        )

    def train_unit(unit, slice_epochs, clock):
        return units.train(unit, slice_epochs, clock, context)

    last_commit = [time.monotonic()]

    def log(message):
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)
        # A commit per finished unit, and at most one per 10 minutes otherwise.
        due = time.monotonic() - last_commit[0] > 600 or ": done" in message
        if args.commit and due:
            commit_results([results_path], f"paper runs: {message}")
            last_commit[0] = time.monotonic()

    run_units(
        todo, results_path, train_unit, Clock(args.max_minutes), args.slice_epochs, log
    )
    if args.render:
        tables.render_all(ROOT, RESULTS["babi"], RESULTS["pointer"])


if __name__ == "__main__":
    main()
