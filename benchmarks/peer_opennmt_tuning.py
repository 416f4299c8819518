"""OpenNMT-py tuned on validation as keras-attn's summarizer is, same data.

`peer_opennmt` runs OpenNMT-py 3.5.1's recipe as its page gives it; this
tunes it as keras-attn's own recipe is tuned. Stages, each resuming after a
kill: `grid` (`grid_points`: dropout x vocabulary, batch 64, keras-attn's
member's size), `extras` (the best grid point with `average_decay`, and
with `share_embeddings`), `search` (beam, length penalty and minimum length
of the best checkpoint of all, on the same dev pairs) and `test` (that
checkpoint and search on the test set, ROUGE with 95% intervals).

Each run saves a checkpoint every `CHECKPOINT_EXAMPLES`, decodes the first
`--dev-examples` dev sources by it (`DEV_DECODING`), scores their ROUGE-1
as keras-attn's validation does, and stops after `PATIENCE` checkpoints
without a better one, or at `CAP_EXAMPLES`. `onmt_train` is paused
(SIGSTOP) while a checkpoint decodes rather than restarted from it: a
resumed `onmt_train` reads its corpus from the start again. Runs, decodings
and `tuning.json` tables live in `--work-dir`; the summary goes to `--output`.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import re
import signal
import subprocess
import time
import zipfile
from pathlib import Path

from benchmarks import peer_opennmt as po
from models.settings.json_files import read_json, write_json

BATCH = 64
# keras-attn's member: its best validation came at 314,880 training examples
# and it stopped early after 17 validations of 26,240: 17 x 26,240 examples,
# 6,970 steps of 64.
CAP_EXAMPLES = 446_080
# keras-attn validates every 25,000 examples (`FitConfig.validate_every`):
# 391 steps of 64.
CHECKPOINT_EXAMPLES = 25_024
PATIENCE = 5  # `FitConfig.patience`
DEV_EXAMPLES = 1000  # keras-attn's validation: the first 1,000 dev pairs
DROPOUTS = (0.0, 0.3)
# `(vocabulary size, minimum count)`, source and target shared. The sample's
# 33,985 words are all under 50,000; 22,198 of them occur twice or more.
VOCABULARIES = {"50k": (50_000, 1), "10k": (10_000, 2)}
# keras-attn averages its weights with momentum 0.999 (`FitConfig.ema_momentum`),
# i.e. 1e-3 of each update. OpenNMT-py's own average weighs an update by
# max(average_decay, 9 / (step + 10)), which is above 1e-3 up to step 8,990:
# under the cap its documented 1e-4 gives the same average.
AVERAGE_DECAY = 1e-3
# The recipe's decoding (no length penalty) at beam 5, `SearchOptions`' beam
# (keras-attn's own validation decodes greedily: no handicap copied here).
DEV_DECODING = {**po.RECIPE_DECODING, "beam_size": 5}
SEARCH_GRID = {"beam_size": (5, 10), "alpha": (0, 0.5, 1, 2, 3), "min_length": (0, 4)}
STAGES = ("grid", "extras", "search", "test")
DEFAULT_WORK_DIR = Path("~/.cache/keras-attn-peers/opennmt-tuning").expanduser()
DEFAULT_OUTPUT = Path("benchmarks/results/peer_opennmt_tuning.json")
_VOCAB_LOG = re.compile(r"\* src vocab size = (\d+)")


def grid_points():
    """`{name: onmt_train options}` of the grid, in a fixed order."""
    points = {}
    for dropout, (vocab, (size, min_count)) in itertools.product(
        DROPOUTS, VOCABULARIES.items()
    ):
        points[f"dropout{dropout}-vocab{vocab}"] = {
            "dropout": dropout,
            **{"src_vocab_size": size, "tgt_vocab_size": size},
            **{"src_words_min_frequency": min_count},
            "tgt_words_min_frequency": min_count,
        }
    return points


def extra_points(name, options):
    """The grid point `name` with a moving average of its weights, and with
    its encoder's and decoder's embeddings shared."""
    return {
        f"{name}-average": {**options, "average_decay": AVERAGE_DECAY},
        f"{name}-shared": {**options, "share_embeddings": True},
    }


def search_options():
    """`onmt_translate` options of each point of `SEARCH_GRID`, in order."""
    return [
        {"beam_size": beam, "length_penalty": "wu", "alpha": alpha, "min_length": m}
        for beam, alpha, m in itertools.product(*SEARCH_GRID.values())
    ]


def run_config(run_dir, data_dir, vocab, options, cap_steps, every):
    """The recipe's member configuration at batch 64 with `options`, a
    checkpoint and a validation every `every` steps and no early stopping
    of its own (the dev ROUGE-1 decides)."""
    config = po.recipe_config("member", run_dir, data_dir)
    config.pop("early_stopping_criteria")
    config.update(batch_size=BATCH, train_steps=cap_steps, early_stopping=0)
    config.update(save_checkpoint_steps=every, valid_steps=every, keep_checkpoint=-1)
    # Windows timed apart from the validations (`parse_training_log`).
    config.update(report_every=min(po.RECIPE["report_every"], max(1, every // 4)))
    config.update(src_vocab=str(vocab), tgt_vocab=str(vocab), **options)
    return config


def best_row(table):
    """The row of the highest dev ROUGE-1, the earliest of equals, or None."""
    return max(table, key=lambda row: row["rouge1"], default=None)


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


def words_at_min_count(vocab, min_count):
    """Words of an `onmt_build_vocab` vocabulary (word, tab, count) that
    occur `min_count` times or more."""
    counts = (line.rsplit("\t", 1)[1] for line in po.read_lines(vocab) if line)
    return sum(int(count) >= min_count for count in counts)


def saved(path):
    """Whether a checkpoint is written in full: a zip's directory comes last."""
    return zipfile.is_zipfile(path)


def _die_with_parent():
    # PR_SET_PDEATHSIG: a killed driver does not leave its trainer running.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


class Run:
    """One training run: its directory, options, and `tuning.json` record."""

    def __init__(self, name, options, args):
        self.name, self.options, self.args = name, options, args
        self.dir = Path(args.work_dir) / name
        self.peer = po.Peer(args.venv, args.threads)
        self.every = args.checkpoint_examples // BATCH
        self.cap_steps = args.cap_examples // BATCH
        self.record_path = self.dir / "tuning.json"
        self.record = read_json(self.record_path, default={})
        self.record.setdefault("table", [])
        self.record.setdefault("train_s", {})
        for key, value in (("every", self.every), ("dev_examples", args.dev_examples)):
            if self.record.setdefault(key, value) != value:
                raise SystemExit(f"{self.dir} has {key}={self.record[key]}: --work-dir")

    def save(self):
        write_json(self.record_path, self.record)

    def finished(self):
        return finished(self.record["table"], self.args.patience, self.cap_steps)

    def score_pending(self):
        """Decodes and scores the checkpoints not yet scored; prunes."""
        steps = po.checkpoint_steps(self.dir)
        for step in pending(steps, self.record["table"]):
            if self.finished():
                break
            rouge1, speed = dev_rouge1(self.args, self.peer, steps[step], self.dir)
            row = {"step": step, "examples": step * BATCH, "rouge1": rouge1}
            self.record["table"].append({**row, **speed})
            self.save()
            print(f"[tuning] {self.name} {row}", flush=True)
        for step in removable(steps, self.record["table"]):
            for path in (steps[step], steps[step].with_suffix(".loadable.pt")):
                path.unlink(missing_ok=True)

    def train(self):
        """Trains, scoring each checkpoint with `onmt_train` paused, until
        `finished`."""
        vocab = Path(self.args.work_dir) / "vocab" / "vocab.txt"
        config = run_config(
            self.dir,
            self.args.data_dir,
            vocab,
            self.options,
            self.cap_steps,
            self.every,
        )
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "config.yml").write_text(json.dumps(config, indent=2))
        self.score_pending()
        while not self.finished():
            command = [
                self.peer.command("onmt_train"),
                "-config",
                self.dir / "config.yml",
            ]
            resume = po.latest_checkpoint(self.dir)
            start_step = 0
            if resume is not None:
                # A resumed run starts a new average from the checkpoint's
                # averaged weights (OpenNMT-py saves the average alone).
                command += ["-train_from", po.loadable(self.peer, resume)]
                start_step = max(po.checkpoint_steps(self.dir))
            print(f"[tuning] {' '.join(map(str, command))}", flush=True)
            status = self._train_once(list(map(str, command)), start_step)
            if status not in (0, -15):
                raise SystemExit(f"onmt_train exited with {status}; see {self.dir}")
            if status == 0 and not pending(
                po.checkpoint_steps(self.dir), self.record["table"]
            ):
                break  # ended with nothing new: the step limit
            self.score_pending()

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
                env=self.peer.env(),
                preexec_fn=_die_with_parent,
                # Its own process group: the kernel hangs up a stopped process
                # whose group its shell's exit leaves orphaned.
                start_new_session=True,
            )
            while process.poll() is None:
                time.sleep(1)
                new = [s for s, p in po.checkpoint_steps(self.dir).items() if s > seen]
                if not new:
                    continue
                process.send_signal(signal.SIGSTOP)
                stopped_at = time.perf_counter()
                path = po.checkpoint_steps(self.dir)[new[0]]
                if saved(path):
                    seen = new[0]
                    active = stopped_at - start - paused
                    self.record["train_s"][str(seen)] = round(base + active, 1)
                    self.save()
                    self.score_pending()
                if self.finished():
                    process.terminate()
                paused += time.perf_counter() - stopped_at
                process.send_signal(signal.SIGCONT)
            active = time.perf_counter() - start - paused
        for step in po.checkpoint_steps(self.dir):  # the one saved at the end
            self.record["train_s"].setdefault(str(step), round(base + active, 1))
        self.save()
        return process.returncode

    def summary(self):
        """The run's table, best row, vocabulary and training speed."""
        table = self.record["table"]
        log = po.read_training_log(self.dir)
        validations = {v[0]: v[1] for v in log.validations}
        for row in table:
            row["valid_ppl"] = validations.get(row["step"])
        logged = _VOCAB_LOG.findall((self.dir / "train.log").read_text())
        vocab = Path(self.args.work_dir) / "vocab" / "vocab.txt"
        seconds = {int(s): t for s, t in self.record["train_s"].items()}
        last = max(seconds, default=0)
        return {
            "options": self.options,
            "table": table,
            "best": best_row(table),
            "finished": self.finished(),
            "vocab_size_logged": int(logged[-1]) if logged else None,
            "words_at_min_count": words_at_min_count(
                vocab, self.options["src_words_min_frequency"]
            ),
            # Training alone, and with the starts, validations and saves.
            "examples_per_s_report_windows": round(log.examples / log.seconds, 2)
            if log.seconds
            else None,
            "examples_per_s_with_validations": round(last * BATCH / seconds[last], 2)
            if seconds.get(last)
            else None,
        }


def dev_sources(args):
    """The first `--dev-examples` dev sources' file and their references."""
    org = Path(args.data_dir) / "org_data"
    source = Path(args.work_dir) / f"dev.{args.dev_examples}.src.txt"
    if not source.exists():
        lines = po.read_lines(org / "dev.src.txt")[: args.dev_examples]
        source.write_text("\n".join(lines) + "\n")
    return source, po.read_lines(org / "dev.tgt.txt")[: args.dev_examples]


def decode(peer, checkpoint, source, output, options):
    """`output`, decoded once: a partial file per process, then renamed."""
    output = Path(output)
    if output.exists():
        return {}
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f"{output.name}.{os.getpid()}.partial")
    log = output.parent / "translate.log"
    timing = po.translate(peer, [checkpoint], source, partial, options, BATCH, log)
    partial.rename(output)
    return {"decode_ms_per_headline": timing["ms_per_headline"]}


def dev_rouge1(args, peer, checkpoint, out_dir, options=DEV_DECODING):
    """Dev ROUGE-1 of `checkpoint` with `options`, and its decoding speed."""
    source, references = dev_sources(args)
    output = Path(out_dir) / "dev" / f"{checkpoint.stem}.{po.options_tag(options)}.txt"
    speed = decode(peer, checkpoint, source, output, options)
    rouge = po.score_headlines(po.read_lines(output), references, n_bootstrap=1)
    return round(rouge["rouge1"]["f1"], 4), speed


def train_runs(points, args):
    """Trains and scores each of `points`; returns `{name: summary}`."""
    peer = po.Peer(args.venv, args.threads)
    po.prepare("member", Path(args.work_dir) / "vocab", args.data_dir, peer)
    summaries = {}
    for name, options in points.items():
        run = Run(name, options, args)
        run.train()
        summaries[name] = run.summary()
    return summaries


def best_of(summaries):
    """`(name, best row)` of the highest dev ROUGE-1 across runs."""
    name = max(summaries, key=lambda n: summaries[n]["best"]["rouge1"])
    return name, summaries[name]["best"]


def search(args, summaries):
    """Each of `search_options` on the best checkpoint; the chosen one."""
    name, best = best_of(summaries)
    checkpoint = Path(args.work_dir) / name / f"model_step_{best['step']}.pt"
    peer, table = po.Peer(args.venv, args.threads), []
    for options in search_options():
        out_dir = Path(args.work_dir) / "search" / name
        rouge1, _ = dev_rouge1(args, peer, checkpoint, out_dir, options)
        table.append({**options, "rouge1": rouge1})
        print(f"[tuning] search {table[-1]}", flush=True)
    chosen = max(table, key=lambda row: row["rouge1"])  # the first of equals
    return {
        "run": name,
        "checkpoint": checkpoint.name,
        "table": table,
        "chosen": chosen,
    }


def test(args, chosen):
    """ROUGE with 95% intervals of the chosen checkpoint and search on the
    test set (its first `--test-examples`)."""
    org, work = Path(args.data_dir) / "org_data", Path(args.work_dir)
    options = {k: v for k, v in chosen["chosen"].items() if k != "rouge1"}
    checkpoint = work / chosen["run"] / chosen["checkpoint"]
    source = work / f"test.{args.test_examples}.src.txt"
    if not source.exists():
        lines = po.read_lines(org / "test.src.txt")[: args.test_examples]
        source.write_text("\n".join(lines) + "\n")
    tag = f"{chosen['run']}.{checkpoint.stem}.{po.options_tag(options)}"
    output = work / "test" / f"{tag}.{args.test_examples}.txt"
    speed = decode(
        po.Peer(args.venv, args.threads), checkpoint, source, output, options
    )
    references = po.read_lines(org / "test.tgt.txt")[: args.test_examples]
    rouge = po.score_headlines(po.read_lines(output), references)
    return {
        **chosen,
        "options": options,
        "examples": len(references),
        "rouge": rouge,
        **speed,
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--stages", default=",".join(STAGES), help="comma-separated STAGES")
    add("--grid", help="comma-separated grid points (default: all of `grid_points`)")
    add("--cap-examples", type=int, default=CAP_EXAMPLES)
    add("--checkpoint-examples", type=int, default=CHECKPOINT_EXAMPLES)
    add("--patience", type=int, default=PATIENCE)
    add("--dev-examples", type=int, default=DEV_EXAMPLES)
    add("--test-examples", type=int, default=1951, help="the first N of the test set")
    add("--venv", type=Path, default=po.DEFAULT_VENV)
    add("--threads", type=int, default=1, help="OpenNMT-py's torch threads")
    add("--work-dir", type=Path, default=DEFAULT_WORK_DIR, help="runs, outside git")
    add("--data-dir", type=Path, default=Path("../shared/data/gigaword_sample"))
    add("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    stages = tuple(args.stages.split(","))
    points = grid_points()
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


def main(argv=None):
    from benchmarks.common import machine_info

    args, stages = parse_args(argv)
    po.make_venv(args.venv)
    po.patch_peer(args.venv)
    grid = {name: grid_points()[name] for name in args.grid}
    result = {"opennmt_py": po.OPENNMT_VERSION, "machine": machine_info()}
    result["settings"] = {
        **{"batch_size": BATCH, "cap_examples": args.cap_examples},
        **{"checkpoint_examples": args.checkpoint_examples, "patience": args.patience},
        **{"dev_examples": args.dev_examples, "dev_decoding": DEV_DECODING},
    }
    # Earlier stages' runs are read back (resumed if unfinished) for later ones.
    runs = train_runs(grid, args)
    result["grid"] = dict(runs) if "grid" in stages else {}
    later = ("extras", "search", "test")
    if any(stage in stages for stage in later):
        name, _ = best_of(runs)
        extras = train_runs(extra_points(name, grid[name]), args)
        result["extras"] = extras if "extras" in stages else {}
        runs.update(extras)
    if "search" in stages or "test" in stages:
        result["search"] = search(args, runs)
        if "test" in stages:
            result["test"] = test(args, result["search"])
    path = Path(args.output)
    write_json(path, po.merge(read_json(path, default={}), result))
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))


if __name__ == "__main__":
    main()
