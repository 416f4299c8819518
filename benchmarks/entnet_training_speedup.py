"""EntNet training examples/s of the working tree against earlier commits, in one run.

Each checkout (a `git worktree` of every `--refs` commit, and the working
tree as `now`) trains the bAbI example as its own `examples/entity_networks.py`
builds it: its `build_model`, its `LengthBuckets` batching (batch 32), Adam
0.01 clipped at 40. Every measurement is a fresh process; the processes
alternate `ref, ..., now, ref, ..., now` for `--rounds` rounds, so a drift of
the machine's load hits every checkout alike. A process loads the task's
first `--examples` training stories, runs one pass over its batches (every
batch shape compiles), then times `--passes` more, in CPU and wall seconds.

Before training it also reports the loss of its untrained model (seed 0) on a
fixed batch, the first 32 stories at full length: checkouts that build the
same model print the same loss, so a speed-up between them is not a
different computation.

```
KERAS_BACKEND=jax python -m benchmarks.entnet_training_speedup \
    --refs a1c9868^ d02361e --rounds 3
```
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(root, task, examples, passes, data_dir):
    """Runs in the child: the checkout at `root` first on `sys.path`."""
    sys.path.insert(0, str(root))
    import keras
    import numpy as np

    from examples import entity_networks as entnet

    data = entnet.load_task(data_dir, task)
    split = tuple(x[:examples] for x in data["train"])
    keras.utils.set_random_seed(0)
    model = entnet.build_model(len(data["vocab"]), data["max_words"])[0]
    model.compile(
        optimizer=keras.optimizers.Adam(0.01, clipnorm=40.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    stories, questions, answers = (x[:32] for x in split)
    fixed_loss = float(model.evaluate([stories, questions], answers, verbose=0))
    buckets = entnet.LengthBuckets(split, 32, seed=0)
    batches = [buckets[i] for i in range(len(buckets))]
    for x, y in batches:
        model.train_on_batch(list(x), y)
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(passes):
        for x, y in batches:
            model.train_on_batch(list(x), y)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    count = passes * sum(len(y) for _, y in batches)
    return {
        "fixed_batch_loss": fixed_loss,
        "batches": len(batches),
        "mean_sentences": float(np.mean([x[0].shape[1] for x, _ in batches])),
        "examples_per_cpu_s": count / cpu,
        "examples_per_wall_s": count / wall,
    }


def _child_command(root, args):
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        str(root),
        "--task",
        str(args.task),
        "--examples",
        str(args.examples),
        "--passes",
        str(args.passes),
        "--data-dir",
        str(args.data_dir),
    ]


def _run_child(root, args):
    out = subprocess.run(
        _child_command(root, args), capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def compare(args, trees):
    """`{name: [result per round]}` over alternating fresh processes."""
    results = {name: [] for name in trees}
    for round_ in range(args.rounds):
        for name, root in trees.items():
            results[name].append(_run_child(root, args))
            line = results[name][-1]
            print(
                f"round {round_ + 1} {name}: "
                f"{line['examples_per_cpu_s']:.1f} examples/CPU s, "
                f"loss {line['fixed_batch_loss']:.6f}",
                file=sys.stderr,
                flush=True,
            )
    return results


def summary(results):
    """Medians per checkout, and each one's per-round ratio against `now`."""
    now = results["now"]
    out = {}
    for name, lines in results.items():
        ratios = [
            n["examples_per_cpu_s"] / r["examples_per_cpu_s"]
            for n, r in zip(now, lines, strict=True)
        ]
        out[name] = {
            "fixed_batch_loss": lines[0]["fixed_batch_loss"],
            "mean_sentences": lines[0]["mean_sentences"],
            "examples_per_cpu_s": statistics.median(
                r["examples_per_cpu_s"] for r in lines
            ),
            "examples_per_wall_s": statistics.median(
                r["examples_per_wall_s"] for r in lines
            ),
            "now_vs_this_per_round": ratios,
        }
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--refs", nargs="*", default=["a1c9868^"])
    parser.add_argument("--task", type=int, default=2)
    parser.add_argument("--examples", type=int, default=1024)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.child is not None:
        line = measure(args.child, args.task, args.examples, args.passes, args.data_dir)
        print(json.dumps(line))
        return
    from benchmarks.paper_runs import machine
    from examples.entity_networks import DEFAULT_DATA_DIR

    # The same files for every checkout (a worktree's own default would
    # look for them beside the worktree).
    args.data_dir = (args.data_dir or DEFAULT_DATA_DIR).resolve()
    with tempfile.TemporaryDirectory() as scratch:
        trees = {}
        for i, ref in enumerate(args.refs):
            path = Path(scratch) / f"ref{i}"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach"]
                + [str(path), ref],
                check=True,
            )
            trees[ref] = path
        trees["now"] = ROOT
        try:
            results = compare(args, trees)
        finally:
            for path in list(trees.values())[:-1]:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force"]
                    + [str(path)],
                    check=False,
                )
    import keras

    report = {
        "backend": keras.backend.backend(),
        "machine": machine(),
        "task": args.task,
        "examples": args.examples,
        "passes": args.passes,
        "rounds": args.rounds,
        "checkouts": summary(results),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
