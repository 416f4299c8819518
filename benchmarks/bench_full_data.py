"""What `train.py` costs on a data set up to its first validation.

    python -m benchmarks.bench_full_data --data-dir /work/fullsize \
        --work /work/fullsize-work --label full
    python -m benchmarks.bench_full_data --data-dir ../shared/data/gigaword_sample \
        --work /tmp/sample-work --label sample

runs `train.py --data-dir D --ensemble 1 --skip-eval` with the caps of
`CAPS` (one member, up to its first validation) as a subprocess, and reads
its lines as they come, each with its time: the offline preparation of the
TFDS dataset, the vocabulary, the time to the first training step (Keras'
bar), the training examples/s between two steps of the first interval
(`--rate-from`, `--rate-to`: past the first steps' tracing), and the first
validation. A sampler reads the process's resident memory (`/proc`, with
its children) every second. At the end: the disk the prepared data and the
run folder take, the machine; one JSON record under `--label` in
`--results` (the records of other labels are kept) and a table.

Resumable by stage: the prepared TFDS folder and the run folder live under
`--work`, and a rerun reuses what they hold (train.py finds the prepared
data; `--fresh-run` removes the run folder, so that the vocabulary is
counted again and the member starts over; `--fresh` removes both). A stage
that a rerun skipped keeps its figure from the record already there.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.common import machine_info, markdown_table
from models.settings.json_files import read_json, write_json

# The cap that ends the command at its first validation (after about 25,000
# examples: a share of a pass on large data, whole passes on small data).
CAPS = ["--stop-after-validations", "1"]
BATCH_SIZE = 64

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STEP = re.compile(r"^\s*(\d+)/(\d+)\b")
_EVENTS = {
    "preparing": re.compile(r"^Preparing the TFDS gigaword dataset"),
    "prepared": re.compile(r"^Prepared gigaword in"),
    "run_started": re.compile(r"^(Starting|Resuming) run .*vocabulary (\d+) words"),
    "validated": re.compile(r"^\[train\.py\] member 1/1, validation \d+ "),
}


def _rss_mib(pid):
    """Resident memory of `pid` and its descendants, MiB (0 once gone)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    return total / 1024


class Monitor:
    """The events of a running train.py, each with its time from the start."""

    def __init__(self, process, log):
        self.process, self.log = process, log
        self.start = time.monotonic()
        self.events: dict[str, float] = {}
        self.steps: list[tuple[float, int]] = []
        self.vocabulary = None
        self.peak = {"all": 0.0}
        self.stage = "start"
        self.lock = threading.Lock()

    def now(self):
        return time.monotonic() - self.start

    def read(self, stream, name):
        buffer = ""
        for chunk in iter(lambda: stream.read1(4096).decode(errors="replace"), ""):
            buffer += chunk
            *lines, buffer = re.split(r"[\r\n]", buffer)
            for line in lines:
                self._line(line, name)
        if buffer:
            self._line(buffer, name)

    def _line(self, line, name):
        t = self.now()
        line = _ANSI.sub("", line)
        with self.lock:
            if name == "stdout" and (m := _STEP.match(line)):
                step, total = int(m.group(1)), int(m.group(2))
                # Keras shows the interval's last step only once it has
                # validated: the step before it ends the training.
                if step < total and (not self.steps or self.steps[-1][1] != step):
                    self.steps.append((t, step))
                    self.events.setdefault("first_step", t)
                    self.events["last_step"] = t
                    self.stage = "training"
                    if step % 50 and step > 1:
                        return
            for event, pattern in _EVENTS.items():
                if m := pattern.search(line):
                    self.events.setdefault(event, t)
                    self.stage = event
                    if event == "run_started":
                        self.vocabulary = int(m.group(2))
            self.log.write(f"{t:9.1f} {name}: {line}\n")
            self.log.flush()

    def sample(self, every=1.0):
        while self.process.poll() is None:
            rss = _rss_mib(self.process.pid)
            with self.lock:
                self.peak["all"] = max(self.peak["all"], rss)
                self.peak[self.stage] = max(self.peak.get(self.stage, 0.0), rss)
            time.sleep(every)


def _du_mib(path):
    path = Path(path)
    if not path.exists():
        return None
    files = [path] if path.is_file() else (p for p in path.rglob("*") if p.is_file())
    return round(sum(p.stat().st_size for p in files) / 2**20, 1)


def _rate(steps, first, last):
    """Examples/s between steps `first` and `last` (full batches of 64)."""
    at = dict((s, t) for t, s in steps)
    got = sorted(s for s in at if first <= s <= last)
    if len(got) < 2 or got[-1] - got[0] < (last - first) // 2:
        return None
    return round((got[-1] - got[0]) * BATCH_SIZE / (at[got[-1]] - at[got[0]]), 1)


def run(args):
    work = Path(args.work).resolve()
    tfds_dir, run_dir = work / "tfds", work / "run"
    if args.fresh:
        shutil.rmtree(tfds_dir, ignore_errors=True)
    if args.fresh or args.fresh_run:
        shutil.rmtree(run_dir, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "train.py",
        "--data-dir",
        str(Path(args.data_dir).resolve()),
        "--tfds-dir",
        str(tfds_dir),
        "--run-dir",
        str(run_dir),
        "--ensemble",
        "1",
        "--skip-eval",
        *CAPS,
        *args.extra,
    ]
    log_dir = Path(args.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    with open(log_dir / f"{args.label}.log", "a") as log:
        log.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n")
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        monitor = Monitor(process, log)
        threads = [
            threading.Thread(target=monitor.read, args=(process.stdout, "stdout")),
            threading.Thread(target=monitor.read, args=(process.stderr, "stderr")),
            threading.Thread(target=monitor.sample, daemon=True),
        ]
        for thread in threads:
            thread.start()
        code = process.wait()
        for thread in threads[:2]:
            thread.join()
        wall = monitor.now()
    return _record(args, monitor, code, wall, tfds_dir, run_dir, command)


def _record(args, monitor, code, wall, tfds_dir, run_dir, command):
    e = monitor.events

    def span(a, b):
        return round(e[b] - e[a], 1) if a in e and b in e else None

    record = {
        "command": " ".join(command[1:]),
        "exit_code": code,
        "wall_s": round(wall, 1),
        "preparation_s": span("preparing", "prepared"),
        # From the prepared data (or the start, when it was prepared before)
        # to the run's line with the vocabulary size.
        "vocabulary_s": round(e["run_started"] - e.get("prepared", 0.0), 1)
        if "run_started" in e and "preparing" in e
        else None,
        "vocabulary_words": monitor.vocabulary,
        "first_step_s": round(e["first_step"], 1) if "first_step" in e else None,
        "examples_per_s": _rate(monitor.steps, args.rate_from, args.rate_to),
        "rate_steps": [args.rate_from, args.rate_to],
        "first_validation_s": span("last_step", "validated"),
        "peak_rss_mib": {k: round(v) for k, v in monitor.peak.items() if v},
        "prepared_data_mib": _du_mib(tfds_dir),
        "run_folder_mib": _du_mib(run_dir),
        "machine": machine_info(),
    }
    if "preparing" not in e:
        # Prepared by an earlier run: its figures stand.
        record["preparation_s"] = record["vocabulary_s"] = None
    return record


def _merge(results_path, label, record):
    results = read_json(results_path, default={})
    old = results.get(label, {})
    for key, value in record.items():
        if value is None and old.get(key) is not None:
            record[key] = old[key]  # a stage this run skipped
    results[label] = record
    write_json(results_path, results)
    return results


def _table(results):
    rows = []
    for label, r in results.items():
        rss = r.get("peak_rss_mib", {}).get("all")
        rows.append(
            [
                label,
                r.get("preparation_s"),
                r.get("vocabulary_s"),
                r.get("vocabulary_words"),
                r.get("first_step_s"),
                r.get("examples_per_s"),
                r.get("first_validation_s"),
                round(rss / 1024, 2) if rss else None,
                r.get("prepared_data_mib"),
                r.get("run_folder_mib"),
            ]
        )
    header = [
        "data",
        "preparation s",
        "vocabulary s",
        "words",
        "first step s",
        "examples/s",
        "first validation s",
        "peak RSS GiB",
        "prepared MiB",
        "run folder MiB",
    ]
    # Whole seconds and MiB: `markdown_table` writes large floats as 1.35e+03.
    rows = [
        [round(x) if isinstance(x, float) and x >= 100 else x for x in r] for r in rows
    ]
    return markdown_table(header, rows)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--data-dir", required=True, help="train.py --data-dir")
    parser.add_argument("--work", required=True, help="prepared data and run folder")
    parser.add_argument("--label", required=True, help="the record's name")
    parser.add_argument("--log-dir", default="/tmp/bench_full_data", help="logs")
    parser.add_argument(
        "--results", type=Path, default=Path("benchmarks/results/full_data.json")
    )
    parser.add_argument("--rate-from", type=int, default=100, help="first step timed")
    parser.add_argument("--rate-to", type=int, default=390, help="last step timed")
    parser.add_argument("--fresh", action="store_true", help="start from nothing")
    parser.add_argument(
        "--fresh-run", action="store_true", help="keep the prepared data only"
    )
    parser.add_argument(
        "extra", nargs="*", help="more train.py flags, after `--`", default=[]
    )
    args = parser.parse_args(argv)
    record = run(args)
    results = _merge(args.results, args.label, record)
    print(json.dumps(record, indent=2))
    print(_table(results))
    return 0 if record["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
