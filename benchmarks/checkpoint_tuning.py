"""A peer tuned by validation ROUGE-1 at its checkpoints, as keras-attn's
summarizer is: the budget and grid every peer shares, and `ScoredRun`.

keras-attn's recipe validates its member about every 25,000 training
examples by the ROUGE-1 of the first 1,000 dev pairs, keeps the best, and
stops after 5 validations without a better one; its member stopped there
after 446,080 examples. A peer gets the same: batch 64, a checkpoint every
`CHECKPOINT_EXAMPLES`, each scored on the same dev pairs, `PATIENCE`, and
`CAP_EXAMPLES` at most, over one grid (`grid_points`: dropout x vocabulary).

`ScoredRun` trains a peer in one process and pauses it (SIGSTOP) while each
new checkpoint is scored, rather than restarting it from the checkpoint: a
restarted trainer reads its corpus from the start again. Its table lives in
the run's `tuning.json`; a killed run resumes from its latest checkpoint.
"""

from __future__ import annotations

import argparse
import copy
import ctypes
import itertools
import os
import signal
import subprocess
import time
import zipfile
from pathlib import Path

from benchmarks.common import merge
from models.settings.json_files import read_json, write_json

BATCH = 64
# keras-attn's member: its best validation came at 314,880 training examples
# and it stopped early after 17 validations of 26,240: 17 x 26,240 examples,
# 6,970 steps of 64.
CAP_EXAMPLES = 446_080
# keras-attn's nominal interval, 25,000 examples (`FitConfig.validate_every`),
# in steps of 64: 391. Its member's interval, rounded to a whole pass over its
# batches (`interval_batches`), was 410 steps: a peer's patience covers 5%
# fewer examples, its cap the same.
CHECKPOINT_EXAMPLES = 25_024
PATIENCE = 5  # `FitConfig.patience`
DEV_EXAMPLES = 1000  # keras-attn's validation: the first 1,000 dev pairs
STAGES = ("grid", "extras", "search", "test")
DROPOUTS = (0.0, 0.3)
# `(vocabulary size, minimum count)`, source and target shared. The sample's
# 33,985 words are all under 50,000; 22,198 of them occur twice or more.
VOCABULARIES = {"50k": (50_000, 1), "10k": (10_000, 2)}


def grid_points():
    """`{name: (dropout, (vocabulary size, minimum count))}` in a fixed order."""
    return {
        f"dropout{dropout}-vocab{name}": (dropout, vocabulary)
        for dropout, (name, vocabulary) in itertools.product(
            DROPOUTS, VOCABULARIES.items()
        )
    }


def best_row(table):
    """The row of the highest dev ROUGE-1, the earliest of equals, or None."""
    return max(table, key=lambda row: row["rouge1"], default=None)


def best_of(summaries):
    """`(name, best row)` of the highest dev ROUGE-1 across runs."""
    name = max(summaries, key=lambda n: summaries[n]["best"]["rouge1"])
    return name, summaries[name]["best"]


def finished(table, patience, cap_steps):
    """Whether `patience` checkpoints came without a better dev ROUGE-1
    after the best, or the cap's checkpoint has been scored."""
    if not table:
        return False
    since_best = len(table) - 1 - table.index(best_row(table))
    return since_best >= patience or table[-1]["step"] >= cap_steps


def pending(checkpoints, table):
    """Steps of the checkpoints not yet scored, in order."""
    scored = {row["step"] for row in table}
    return [step for step in checkpoints if step not in scored]


def removable(checkpoints, table):
    """Scored checkpoints that are neither the best nor the latest (resumed
    from): their files can go."""
    best, latest = best_row(table), max(checkpoints, default=None)
    scored = {row["step"] for row in table}
    keep = {latest, best and best["step"]}
    return [step for step in checkpoints if step in scored and step not in keep]


def saved(path):
    """Whether a checkpoint is written in full: a zip's directory comes last
    (torch saves zips)."""
    return zipfile.is_zipfile(path)


def _trainer_setup(parent):
    """The trainer's `preexec_fn`: killed when `parent` ends
    (PR_SET_PDEATHSIG), so that a killed driver leaves no trainer running,
    and in a process group of its own, signalled as one. It stays in the
    driver's session: a session of its own would be scheduled apart from the
    driver's (Linux's autogroups), whatever the driver's priority."""

    def setup():
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
        if os.getppid() != parent:  # it ended before the signal was armed
            os._exit(1)
        os.setpgid(0, 0)

    return setup


def _signal_group(process, sig):
    """`sig` to the trainer and the processes it started (its loaders)."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


class ScoredRun:
    """One training run scored at each checkpoint until `finished`.

    A peer's run says how it trains and scores: `checkpoints()` (`{step:
    path}`), `command(resume)` (its trainer's command, from the checkpoint
    `resume` or from scratch), `env()`, `score(path)` (`(dev ROUGE-1, a dict
    of more figures)`) and `remove(path)` (a checkpoint's files).
    """

    poll_s = 1.0  # how often the trainer's folder is looked at

    def __init__(self, run_dir, args):
        self.dir, self.args = Path(run_dir), args
        self.every = args.checkpoint_examples // BATCH
        self.cap_steps = args.cap_examples // BATCH
        self.record_path = self.dir / "tuning.json"
        self.record = read_json(self.record_path, default={})
        self.record.setdefault("table", [])
        self.record.setdefault("train_s", {})
        for key, value in (("every", self.every), ("dev_examples", args.dev_examples)):
            if self.record.setdefault(key, value) != value:
                raise SystemExit(f"{self.dir} has {key}={self.record[key]}: --work-dir")

    def checkpoints(self):
        raise NotImplementedError

    def command(self, resume):
        raise NotImplementedError

    def env(self):
        raise NotImplementedError

    def score(self, path):
        raise NotImplementedError

    def remove(self, path):
        raise NotImplementedError

    @property
    def name(self):
        return self.dir.name

    def save(self):
        write_json(self.record_path, self.record)

    def finished(self):
        return finished(self.record["table"], self.args.patience, self.cap_steps)

    def saved_checkpoints(self):
        """`checkpoints()` written in full."""
        return {step: path for step, path in self.checkpoints().items() if saved(path)}

    def score_pending(self):
        """Scores the checkpoints not yet scored; removes the others."""
        steps = self.saved_checkpoints()
        for step in pending(steps, self.record["table"]):
            if self.finished():
                break
            rouge1, more = self.score(steps[step])
            row = {"step": step, "examples": step * BATCH, "rouge1": rouge1}
            self.record["table"].append({**row, **more})
            self.save()
            print(f"[tuning] {self.name} {row}", flush=True)
        for step in removable(steps, self.record["table"]):
            self.remove(steps[step])

    def train(self):
        """Trains from the latest checkpoint, scoring each new one with the
        trainer paused, until `finished`."""
        self.dir.mkdir(parents=True, exist_ok=True)
        for path in self.checkpoints().values():
            if not saved(path):  # cut short by a kill while it was written
                self.remove(path)
        self.score_pending()
        if self.finished():
            return
        steps = self.checkpoints()
        resume = steps[max(steps)] if steps else None
        if resume is not None:
            # A resumed trainer reads its data from the start of an epoch.
            self.record.setdefault("resumed_at", []).append(max(steps))
        command = list(map(str, self.command(resume)))
        shown = (arg if "\n" not in arg else "<script>" for arg in command)
        print(f"[tuning] {' '.join(shown)}", flush=True)
        status = self._train_once(command, max(steps, default=0))
        self.score_pending()
        if not self.finished():
            raise SystemExit(
                f"The trainer exited with {status} before the run finished; "
                f"see {self.dir / 'train.log'}"
            )

    def _train_once(self, command, start_step):
        # Training seconds up to the checkpoint resumed from (work lost to a
        # kill after a run's last checkpoint not counted).
        known = self.record["train_s"].items()
        base = max((t for s, t in known if int(s) <= start_step), default=0.0)
        seen, paused = start_step, 0.0
        with open(self.dir / "train.log", "a") as log:
            start = time.perf_counter()
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env(),
                preexec_fn=_trainer_setup(os.getpid()),
            )
            try:
                while process.poll() is None:
                    time.sleep(self.poll_s)
                    new = [s for s, p in self.checkpoints().items() if s > seen]
                    if not new:
                        continue
                    _signal_group(process, signal.SIGSTOP)
                    stopped_at = time.perf_counter()
                    if saved(self.checkpoints()[new[0]]):
                        seen = new[0]
                        active = stopped_at - start - paused
                        self.record["train_s"][str(seen)] = round(base + active, 1)
                        self.save()
                        self.score_pending()
                    if self.finished():
                        _signal_group(process, signal.SIGTERM)
                    paused += time.perf_counter() - stopped_at
                    _signal_group(process, signal.SIGCONT)
            finally:
                if process.poll() is None:  # a scoring failed: no trainer left
                    _signal_group(process, signal.SIGKILL)
                    process.wait()
            active = time.perf_counter() - start - paused
        for step in self.saved_checkpoints():  # the one saved at the end
            self.record["train_s"].setdefault(str(step), round(base + active, 1))
        self.save()
        return process.returncode

    def examples_per_s(self):
        """Training examples a second to the latest checkpoint, including the
        trainer's starts and saves, excluding the pauses for scoring; None
        before a checkpoint."""
        seconds = {int(s): t for s, t in self.record["train_s"].items()}
        last = max(seconds, default=0)
        return round(last * BATCH / seconds[last], 2) if seconds.get(last) else None


def tuning_parser(description, peer, venv, work_dir, output):
    """The command line of a peer's tuning: `STAGES`, `--grid`, the budget,
    the test set's size, and the peer's venv, threads and folders."""
    parser = argparse.ArgumentParser(description=description)
    add = parser.add_argument
    add("--stages", default=",".join(STAGES), help="comma-separated STAGES")
    add("--grid", help="comma-separated grid points (default: all of them)")
    add("--cap-examples", type=int, default=CAP_EXAMPLES)
    add("--checkpoint-examples", type=int, default=CHECKPOINT_EXAMPLES)
    add("--patience", type=int, default=PATIENCE)
    add("--dev-examples", type=int, default=DEV_EXAMPLES)
    add("--test-examples", type=int, default=1951, help="the first N of the test set")
    add("--venv", type=Path, default=venv)
    add("--threads", type=int, default=1, help=f"{peer}'s torch threads")
    add("--work-dir", type=Path, default=work_dir, help="runs, outside git")
    add("--data-dir", type=Path, default=Path("../shared/data/gigaword_sample"))
    add("--output", type=Path, default=output)
    add(
        "--report",
        action="store_true",
        help="write the runs' tables as they stand, training nothing",
    )
    return parser


def parse_tuning_args(parser, points, argv=None):
    """`(args, stages)`, `args.grid` the names of `points` to train."""
    args = parser.parse_args(argv)
    stages = tuple(args.stages.split(","))
    args.grid = tuple(args.grid.split(",")) if args.grid else tuple(points)
    for flag, given, known in (
        ("--stages", stages, STAGES),
        ("--grid", args.grid, points),
    ):
        unknown = ",".join(sorted(set(given) - set(known)))
        if unknown:
            parser.error(f"`{flag}` must be of {','.join(known)}. Received: {unknown}")
    if args.checkpoint_examples < BATCH or args.cap_examples < args.checkpoint_examples:
        parser.error(
            "`--checkpoint-examples` must be at least 64 and at most `--cap-examples`. "
            f"Received: {args.checkpoint_examples=}, {args.cap_examples=}"
        )
    return args, stages


def budget_settings(args):
    """The budget a result was measured under, for its JSON."""
    return {
        **{"batch_size": BATCH, "cap_examples": args.cap_examples},
        **{"checkpoint_examples": args.checkpoint_examples, "patience": args.patience},
        "dev_examples": args.dev_examples,
    }


def train_runs(make_run, points, args, train=True):
    """Trains and scores each of `points` (`{name: options}`) by its
    `make_run(name, options, args)`; returns `{name: run.summary()}`."""
    summaries = {}
    for name, options in points.items():
        run = make_run(name, options, args)
        if train:
            run.train()
        summaries[name] = run.summary()
    return summaries


def run_stages(args, stages, grid, *, make_run, extra_points, search, test):
    """The tuning's `stages` over `grid` (`{name: options}`) with a peer's
    `make_run(name, options, args)` (a `ScoredRun` with a `summary()`),
    `extra_points(name, options)`, `search(args, summaries)` and `test(args,
    chosen)`: the result's `grid`, `extras`, `search` and `test`. Earlier
    stages' runs are read back (resumed if unfinished) for later ones; the
    extras only once begun, unless `extras` is a stage, so that a search
    without them covers what has been trained (`search["runs"]` names it).
    With `args.report`, the grid's runs begun so far, as they stand, and
    nothing trained."""
    if args.report:
        return {"grid": train_runs(make_run, _begun(grid, args), args, train=False)}
    result, runs = {}, train_runs(make_run, grid, args)
    result["grid"] = dict(runs) if "grid" in stages else {}
    if any(stage in stages for stage in ("extras", "search", "test")):
        name, _ = best_of(runs)
        extras = extra_points(name, grid[name])
        extras = extras if "extras" in stages else _begun(extras, args)
        extras = train_runs(make_run, extras, args)
        result["extras"] = extras if "extras" in stages else {}
        runs.update(extras)
    if "search" in stages or "test" in stages:
        result["search"] = {**search(args, runs), "runs": list(runs)}
        if "test" in stages:
            result["test"] = test(args, result["search"])
    return result


def _begun(points, args):
    return {n: o for n, o in points.items() if Path(args.work_dir, n).is_dir()}


def _progress(summary):
    """How far a run went: finished first, then its examples scored."""
    table = summary.get("table") or [{}]
    return bool(summary.get("finished")), table[-1].get("examples", 0)


def record_result(path, result):
    """Merges `result` into the JSON at `path` and writes it back.

    A run's checkpoints live outside git, on the machine that trained it; its
    table is all that outlives that machine. So a run of `grid` or `extras`
    begun again elsewhere replaces its recorded table only once it has gone
    further (finished, or more examples scored); until then the record
    stands. Each run keeps the machine it was measured on."""
    recorded = read_json(path, default={})
    for stage in ("grid", "extras"):
        old, new = recorded.get(stage, {}), result.get(stage, {})
        for run in old.values():
            run.setdefault("machine", copy.deepcopy(recorded.get("machine")))
        for name, run in new.items():
            if name in old and _progress(old[name]) >= _progress(run):
                new[name] = old[name]
            else:
                new[name] = {**run, "machine": copy.deepcopy(result["machine"])}
                old.pop(name, None)
    write_json(path, merge(recorded, result))
