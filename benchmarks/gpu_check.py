"""The recipe's member trained on JAX for a fixed time, on a GPU or a CPU
(BENCHMARKS.md, "A GPU check"): examples/s, step time, peak device memory,
and the validation ROUGE-1 reached with the examples it took, as JSON.

It needs JAX, Keras and this checkout, never TensorFlow: it reads a run
folder that `train.py --backend jax` prepared in a TensorFlow process
(`python train.py --backend jax --data-dir DATA --run-dir DIR`), and trains
its first member as `train.py --backend jax` does (the same fit loop,
schedule and validation), in a folder of its own, until `--seconds` have
passed since it started; it then stops at the next batch and writes what it
has:

    KERAS_BACKEND=jax python -m benchmarks.gpu_check --run-dir DIR \\
        --out gpu_check.json

`train.py` flags other than the plain command's that prepared the run
follow the script's own.
"""

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

# Training steps after the first of each batch shape: JAX compiles one
# program a shape (5 source buckets), and a compiling step is no step time.
WARM_UP_STEPS = 5


def argument_parser():
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu_check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--run-dir", type=Path, required=True, help="a prepared run folder"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("gpu_check.json"), help="the JSON written"
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=300.0,
        help="wall time from start after which training stops (default 300)",
    )
    parser.add_argument(
        "--member-dir",
        type=Path,
        default=None,
        help="where the member trains, emptied first (default: RUN_DIR/gpu_check)",
    )
    return parser


def parse_args(argv=None):
    """The script's arguments; those it does not know are `train.py`'s
    flags that the run was prepared with (`args.train_flags`)."""
    args, train_flags = argument_parser().parse_known_args(argv)
    args.train_flags = train_flags
    if args.seconds <= 0:
        raise SystemExit(f"`--seconds` must be > 0. Received: seconds={args.seconds}")
    if args.member_dir is None:
        args.member_dir = args.run_dir / "gpu_check"
    return args


class TimeUp(Exception):
    """The time cap passed."""


class Clock:
    """Step times, the examples trained and the validations, with the
    deadline checked at every training and validation batch.

    Built as a Keras callback by `callback()` so that this module imports
    no Keras at all until it trains (its arguments are tested alone).
    """

    def __init__(self, deadline, batch_size, clock=time.monotonic):
        self.deadline = deadline
        self.batch_size = batch_size
        self.clock = clock
        self.steps = []
        self.validations = []
        self._last = None

    def check(self):
        if self.clock() >= self.deadline:
            raise TimeUp

    def step_begin(self):
        self._last = self.clock()

    def step_end(self):
        self.steps.append(self.clock() - self._last)
        print_progress(self)
        self.check()

    def validation(self, validations, seconds, score, *_):
        self.validations.append(
            {
                "validation": validations,
                "examples": len(self.steps) * self.batch_size,
                "rouge1": score,
                "interval_s": round(seconds, 2),
            }
        )
        print(
            f"validation {validations} ({len(self.steps) * self.batch_size:,} "
            f"examples): ROUGE-1 {score:.2f}",
            flush=True,
        )

    def callback(self):
        import keras

        clock = self

        class Callback(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                clock.step_begin()

            def on_train_batch_end(self, batch, logs=None):
                clock.step_end()

            def on_test_batch_end(self, batch, logs=None):
                clock.check()

        return Callback()


def print_progress(clock, every=50):
    # The first steps one by one: they compile.
    if len(clock.steps) <= WARM_UP_STEPS:
        print(f"step {len(clock.steps)}: {clock.steps[-1]:.1f} s", flush=True)
    elif len(clock.steps) % every == 0:
        recent = statistics.median(clock.steps[-every:])
        print(
            f"step {len(clock.steps):,}: {1000 * recent:.0f} ms a step (median of "
            f"the last {every})",
            flush=True,
        )


def summary(clock, seconds, batch_size, train_examples, memory):
    """What the JSON holds."""
    steady = clock.steps[WARM_UP_STEPS:]
    step = statistics.median(steady) if steady else None
    best = max(clock.validations, key=lambda v: v["rouge1"], default=None)
    return {
        "steps": len(clock.steps),
        "examples": len(clock.steps) * batch_size,
        "batch_size": batch_size,
        "seconds": round(seconds, 1),
        "step_s_median": step,
        "examples_per_s": batch_size / step if step else None,
        # Examples over the whole time: compiling, validations included.
        "examples_per_s_overall": len(clock.steps) * batch_size / seconds,
        "validations": clock.validations,
        "best_rouge1": best and best["rouge1"],
        "best_rouge1_examples": best and best["examples"],
        "member_train_examples": train_examples,
        # The steps alone of the plain command's three members.
        "three_members_steps_s": 3 * train_examples * step / batch_size
        if step
        else None,
        **memory,
    }


def peak_memory():
    """The device's peak bytes in use where JAX reports them, else this
    process's peak RSS (JAX on CPU reports none)."""
    import jax

    device = jax.devices()[0]
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if stats and "peak_bytes_in_use" in stats:
        return {"device": str(device), "peak_device_bytes": stats["peak_bytes_in_use"]}
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"device": str(device), "peak_rss_bytes": rss}


def train(args, start):
    """Trains the run's first member until done or `args.seconds` from
    `start`; returns the summary."""
    import train as train_command
    from models.training.array_training import load_array_run, train_member_on_arrays

    settings = train_command.parse_settings(
        ["--backend", "jax", "--run-dir", str(args.run_dir), *args.train_flags]
    )
    run = load_array_run(settings)
    options = dataclasses.replace(settings.training, jit_compile=True)
    shutil.rmtree(args.member_dir, ignore_errors=True)
    batch_size = run.schedule.batch_size
    clock = Clock(start + args.seconds, batch_size)
    print(
        f"training on {first_device()}: {len(run.train):,} examples, batch "
        f"{batch_size}, a validation every {run.schedule.interval_batches} steps, "
        f"for at most {args.seconds:.0f} s",
        flush=True,
    )
    try:
        train_member_on_arrays(
            args.member_dir,
            run,
            options,
            on_validation=clock.validation,
            callbacks=[clock.callback()],
        )
    except TimeUp:
        print("time is up", flush=True)
    return summary(
        clock,
        time.monotonic() - start,
        batch_size,
        run.schedule.train_examples,
        peak_memory(),
    )


def first_device():
    import jax

    return jax.devices()[0]


def main(argv=None):
    start = time.monotonic()
    args = parse_args(argv)
    os.environ["KERAS_BACKEND"] = "jax"
    result = train(args, start)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2), flush=True)
    if "tensorflow" in sys.modules:
        raise SystemExit("TensorFlow was imported: the GPU machine has none")


if __name__ == "__main__":
    main()
