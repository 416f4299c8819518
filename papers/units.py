"""The papers' recipes as units of `papers.runner`: one resumable training run each.

bAbI (Henaff et al. 2017, as the authors' code): Adam 0.01 halved every 25
epochs, at most 200 epochs, batch 32, gradients clipped at norm 40, N(0, 0.1)
initialization, 20 slots of 100 dimensions, one PReLU slope tied across the
memory and the output, separate learned position masks for the story and
the question, memories normalized after each update, a 90/10 train/validation
split (the same for every seed), at most 70 sentences (130 for task 3). A run
stops at 0% validation error; its test error is the one of its epoch of
lowest validation error.

Pointer Networks (Vinyals et al. 2015): one-layer LSTMs of the paper's 256
units, batch 128, gradients clipped at 2.0, 1M training examples generated
on the fly (an "epoch" here is one chunk of `chunk` fresh examples, drawn by
`(seed, chunk index)`, so a resumed run sees the examples it would have
seen). Adam 1e-3 instead of the paper's SGD 1.0 (the examples' default: it
converges in fewer steps). The TSP reference at n <= 10 is Held-Karp; at
n = 20 it is Held-Karp too, computed once and cached beside the checkpoints.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import keras
import numpy as np
from keras import ops

from models.settings.json_files import whole_file
from papers import entity_networks as entnet
from papers import planar_problems
from papers import pointer_networks as ptrnet

BABI_MAX_EPOCHS = 200
BABI_CLIPS = ("per-variable", "summed-global")
BABI_HALVE_EVERY = 25
BABI_SCHEDULES = ("halving", "cyclic")

# The paper's settings where the budget allows; `chunk` examples an epoch.
POINTER_CONFIGS = {
    # Every configuration decodes with a beam of 5 over valid outputs only
    # (`pointer_networks.evaluate`), as the paper's TSP rows did.
    "hull-5-50": {"task": "hull", "train_n": "5-50", "test_n": [5, 10, 50], "beam": 5},
    "hull-50": {"task": "hull", "train_n": "50", "test_n": [50], "beam": 5},
    # TSP's labels above n = 10: 2-opt tours from the nearest neighbour, or
    # 2-opt with Or-opt from 5 random starts (closer to the optimum).
    "tsp-5-20": {
        "task": "tsp",
        "train_n": "5-20",
        "test_n": [5, 10, 20],
        "beam": 5,
        "labels": "2-opt",
    },
    "tsp-5-20-or-opt": {
        "task": "tsp",
        "train_n": "5-20",
        "test_n": [5, 10, 20],
        "beam": 5,
        "labels": "or-opt",
    },
}
POINTER_DEFAULTS = {
    "units": 256,
    "batch_size": 128,
    "examples": 1_000_000,
    "chunk": 20_000,
    "val_size": 1000,
    "test_size": 1000,
    "tsp20_test_size": 500,
    "pad_to": 5,
    "learning_rate": 1e-3,
    "beam": 1,
}


class Checkpoint:
    """A unit's weights, optimizer variables and state, saved every epoch.

    One `.npz` file, replaced atomically: a run killed while saving resumes
    from the previous epoch, never from weights of one epoch and the state
    of another.
    """

    def __init__(self, directory):
        self.directory = Path(directory)
        self.path = self.directory / "checkpoint.npz"

    def save(self, model, state):
        self.directory.mkdir(parents=True, exist_ok=True)
        arrays = {f"w{i}": np.asarray(w) for i, w in enumerate(model.get_weights())}
        for i, v in enumerate(model.optimizer.variables):
            arrays[f"o{i}"] = ops.convert_to_numpy(v)
        arrays["state"] = np.array(json.dumps(state))
        with whole_file(self.path) as partial:
            np.savez(partial, **arrays)

    def load(self, model):
        """The saved state (weights and optimizer restored), or None."""
        if not self.path.exists():
            return None
        with np.load(self.path) as arrays:
            n_weights = len(model.get_weights())
            model.set_weights([arrays[f"w{i}"] for i in range(n_weights)])
            model.optimizer.build(model.trainable_variables)
            for i, v in enumerate(model.optimizer.variables):
                v.assign(arrays[f"o{i}"])
            return json.loads(str(arrays["state"]))


def babi_units(
    tasks,
    seeds,
    max_epochs=None,
    data_dir=None,
    *,
    clip="per-variable",
    biases=False,
    schedule="halving",
):
    """Seeds outer, tasks inner: every task gets a run before any a second.

    `clip`: `"per-variable"` (Keras' `clipnorm=40` on the batch's mean loss,
    the runner's first recipe), or `"summed-global"`, as the authors' code
    does it: the batch's loss summed over its examples, and its gradient's
    global norm clipped at 40. At the start of a task the mean loss's
    gradients stay far below the clip and the sum's pass it
    (docs/history.md, "Entity Networks"). Such units are named
    `.../summed-global` and count as further runs of their task.

    `biases`: the memory gets the gate and candidate biases of the authors'
    code (`EntityMemoryCell(use_bias=True)`); such units end in `/biases`.

    `schedule`: the learning rate, `"halving"` (the paper's) or `"cyclic"`
    (see `babi_learning_rate`); the latter's units end in `/cyclic`.
    """
    if clip not in BABI_CLIPS:
        raise ValueError(
            f"`clip` must be one of {list(BABI_CLIPS)}. Received: clip={clip!r}"
        )
    if schedule not in BABI_SCHEDULES:
        raise ValueError(
            f"`schedule` must be one of {list(BABI_SCHEDULES)}. "
            f"Received: schedule={schedule!r}"
        )
    suffix = (
        ("" if clip == "per-variable" else f"/{clip}")
        + ("/biases" if biases else "")
        + ("" if schedule == "halving" else f"/{schedule}")
    )
    return [
        {
            "unit": f"babi/task{task}/seed{seed}{suffix}",
            "group": f"babi/task{task}",
            "kind": "babi",
            "task": task,
            "seed": seed,
            "clip": clip,
            "biases": biases,
            "schedule": schedule,
            "max_epochs": max_epochs or BABI_MAX_EPOCHS,
            "data_dir": str(data_dir or entnet.DEFAULT_DATA_DIR),
        }
        for seed in seeds
        for task in tasks
    ]


def babi_learning_rate(schedule, epoch, step, steps_per_epoch):
    """The learning rate of batch `step` (from 0) of `epoch` (from 0).

    `"halving"`: the paper's, 0.01 halved every 25 epochs. `"cyclic"`: the
    triangular cyclic rate of the TensorFlow reimplementation that solved
    tasks 16 and 19 (`jimfleming/recurrent-entity-networks`, whose README
    says those two needed it), from 2e-4 up to 1e-2 over 10 epochs and back
    down over the next 10, batch by batch.
    """
    if schedule == "halving":
        return 0.01 * 0.5 ** (epoch // BABI_HALVE_EVERY)
    half_cycles = (epoch * steps_per_epoch + step) / (10 * steps_per_epoch)
    rise = 1.0 - abs(half_cycles % 2.0 - 1.0)
    return 2e-4 + (1e-2 - 2e-4) * rise


def babi_compile(model, clip):
    """Adam 0.01 with the norm-40 clip of `clip` (see `babi_units`)."""
    summed = clip == "summed-global"
    model.compile(
        optimizer=keras.optimizers.Adam(
            0.01, **({"global_clipnorm": 40.0} if summed else {"clipnorm": 40.0})
        ),
        loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="sum" if summed else "sum_over_batch_size"
        ),
    )


def pointer_units(
    configs, seeds, max_epochs=None, pad_to=None, lr_drop_epochs=(), data_workers=1
):
    """The Ptr-Net units of `configs` x `seeds`.

    `data_workers`: processes that make the coming epochs' examples while
    this one trains (`EpochData`); 0 makes each in the training process.

    `pad_to` overrides the batches' width step (`POINTER_DEFAULTS`). The
    padding is masked, so it changes which examples share a batch, not the
    loss of an example: a GPU run pads every batch to the largest `n` (one
    shape, one compilation), a CPU run pads less and computes less.

    `lr_drop_epochs`: from each of these epochs (from 0) on, Adam's learning
    rate is a tenth of what it was (two drops: a hundredth of the recipe's).
    The rate is a function of the epoch alone, so a resumed run trains as an
    uninterrupted one would.
    """
    configs = configs or list(POINTER_CONFIGS)
    units = []
    for seed in seeds:
        for name in configs:
            if name not in POINTER_CONFIGS:
                raise ValueError(
                    f"`config` must be one of {sorted(POINTER_CONFIGS)}. "
                    f"Received: config={name!r}"
                )
            settings = {**POINTER_DEFAULTS, **POINTER_CONFIGS[name]}
            if pad_to is not None:
                settings["pad_to"] = pad_to
            settings["lr_drop_epochs"] = sorted(lr_drop_epochs or ())
            settings["data_workers"] = data_workers
            epochs = settings["examples"] // settings["chunk"]
            units.append(
                {
                    "unit": f"pointer/{name}/seed{seed}",
                    "group": f"pointer/{name}",
                    "kind": "pointer",
                    "config": name,
                    "seed": seed,
                    "max_epochs": max_epochs or epochs,
                    **settings,
                }
            )
    return units


def _claim(directory):
    """Takes the unit's lock file; False while another live process holds it
    (two runners on disjoint or overlapping units never train one unit twice)."""
    directory.mkdir(parents=True, exist_ok=True)
    lock = directory / "lock"
    try:
        holder = int(lock.read_text())
        os.kill(holder, 0)
        if holder != os.getpid():
            return False
    except PermissionError:
        return False  # alive, another user's
    except (FileNotFoundError, ValueError, ProcessLookupError):
        pass  # free, unreadable or left by a dead process
    lock.write_text(str(os.getpid()))
    return True


def train(unit, slice_epochs, clock, context):
    """Trains `unit` from its checkpoint for at most `slice_epochs` epochs.

    Returns:
        The unit's result line, or None when another runner holds the unit.
    """
    root = Path(context["checkpoints"])
    checkpoint = Checkpoint(root / unit["unit"])
    if not _claim(checkpoint.directory):
        return None
    try:
        if unit["kind"] == "babi":
            line = _babi_epochs(unit, checkpoint, slice_epochs, clock)
        else:
            line = _pointer_epochs(unit, checkpoint, slice_epochs, clock, root)
    finally:
        (checkpoint.directory / "lock").unlink(missing_ok=True)
    keys = ("machine", "backend", "command", "commit")
    return {**{k: context[k] for k in keys}, **line}


def _fresh_state():
    return {
        "epoch": 0,
        "best_val": None,
        "best_epoch": 0,
        "test": None,
        "curve": [],
        "cpu_seconds": 0.0,
        "wall_seconds": 0.0,
    }


def run_epochs(
    unit, checkpoint, model, slice_epochs, clock, epoch_fn, stop_fn, test_at_best
):
    """The shared loop: resume, train epochs, checkpoint, and the result line.

    `epoch_fn(epoch, state) -> (loss, val_error, test)` trains and validates
    one epoch; `test()` evaluates on the test set: at every new best
    validation error with `test_at_best` (bAbI: the kept epoch's test
    error), else once at the end of the visit (Ptr-Nets: the validation
    loss on fresh examples hardly overfits, and decoding is slow).
    `stop_fn(state)` says the recipe's stopping rule is met.
    """
    state = checkpoint.load(model) or _fresh_state()
    visit, test = 0, None
    while state["epoch"] < unit["max_epochs"] and not stop_fn(state):
        if clock.expired() or (slice_epochs and visit >= slice_epochs):
            break
        cpu, wall = time.process_time(), time.monotonic()
        loss, val_error, test = epoch_fn(state["epoch"], state)
        state["epoch"] += 1
        state["curve"].append([round(loss, 5), round(val_error, 5)])
        if state["best_val"] is None or val_error < state["best_val"]:
            state.update(best_val=val_error, best_epoch=state["epoch"])
            if test_at_best:
                state["test"] = test()
        state["cpu_seconds"] += time.process_time() - cpu
        state["wall_seconds"] += time.monotonic() - wall
        checkpoint.save(model, state)
        visit += 1
    if test is not None and not test_at_best:
        cpu, wall = time.process_time(), time.monotonic()
        state["test"] = test()
        state["cpu_seconds"] += time.process_time() - cpu
        state["wall_seconds"] += time.monotonic() - wall
        checkpoint.save(model, state)
    done = state["epoch"] >= unit["max_epochs"] or stop_fn(state)
    test = state["test"] or {}
    return {
        "unit": unit["unit"],
        "group": unit["group"],
        "seed": unit["seed"],
        "status": "done" if done else "partial",
        "val_error": state["best_val"],
        "test_error": test.get("error"),
        "test": test,
        "epochs": state["epoch"],
        "best_epoch": state["best_epoch"],
        "max_epochs": unit["max_epochs"],
        "curve": state["curve"],
        "cpu_seconds": state["cpu_seconds"],
        "wall_seconds": state["wall_seconds"],
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


# ------------------------------------------------------------------ bAbI


def _babi_epochs(unit, checkpoint, slice_epochs, clock):
    task, seed = unit["task"], unit["seed"]
    data = entnet.load_task(unit["data_dir"], task, seed=0)
    keras.utils.set_random_seed(seed)
    model, _ = entnet.build_model(
        len(data["vocab"]), data["max_words"], use_bias=unit.get("biases", False)
    )
    clip = unit.get("clip", "per-variable")
    babi_compile(model, clip)
    batches = entnet.LengthBuckets(data["train"], 32, seed=seed)
    schedule = unit.get("schedule", "halving")

    def epoch_fn(epoch, state):
        batches.shuffle(epoch)
        losses = []
        for i in range(len(batches)):
            model.optimizer.learning_rate.assign(
                babi_learning_rate(schedule, epoch, i, len(batches))
            )
            (stories, questions), answers = batches[i]
            losses.append(float(model.train_on_batch([stories, questions], answers)))
        val_error = entnet.error_rate(model, data["val"])

        def test():
            return {"error": entnet.error_rate(model, data["test"])}

        return float(np.mean(losses)), val_error, test

    line = run_epochs(
        unit,
        checkpoint,
        model,
        slice_epochs,
        clock,
        epoch_fn,
        lambda state: state["best_val"] == 0,
        test_at_best=True,
    )
    line.update(
        task=task,
        subset=data["subset"],
        n_train=len(data["train"][2]),
        n_val=len(data["val"][2]),
        recipe=(
            (
                "adam 0.01 halved/25 ep"
                if schedule == "halving"
                else "adam, cyclic lr 2e-4 to 1e-2 and back every 20 ep"
            )
            + ", batch 32, clip 40, 20x100, tied PReLU"
            + ("" if clip == "per-variable" else ", summed loss, global clip")
            + (", gate and candidate biases" if unit.get("biases") else "")
        ),
    )
    return line


# ------------------------------------------------------------------ Ptr-Net


def tsp_reference(points, cache_dir, name):
    """Held-Karp tours' lengths of `points`, cached as `name.npy`."""
    path = Path(cache_dir) / f"{name}.npy"
    if path.exists():
        return np.load(path)
    # One instance at a time at n = 20: 2^19 subsets x 19 ends in float64.
    lengths = np.concatenate(
        [planar_problems.held_karp(points[i : i + 1])[1] for i in range(len(points))]
    )
    with whole_file(path) as partial:
        np.save(partial, lengths)
    return lengths


def pointer_test_groups(unit, cache_dir):
    groups = []
    for n in unit["test_n"]:
        size = unit["tsp20_test_size"] if unit["task"] == "tsp" and n > 10 else None
        count = size or unit["test_size"]
        points = planar_problems.make_points(count, n, seed=10_000 + n)
        group = {"n": n, "points": points}
        if unit["task"] == "hull":
            group["targets"] = [planar_problems.convex_hull(p) for p in points]
        elif n <= planar_problems.HELD_KARP_MAX_N:
            group["ref"] = planar_problems.held_karp(points)[1]
        else:
            group["ref"] = tsp_reference(points, cache_dir, f"tsp{n}_x{count}")
        group["reference"] = "optimal" if unit["task"] == "tsp" else None
        groups.append(group)
    return groups


def pointer_learning_rate(unit, epoch):
    """Adam's learning rate in `epoch` (from 0): the recipe's, a tenth of it
    from each of `lr_drop_epochs` on."""
    drops = sum(epoch >= drop for drop in unit.get("lr_drop_epochs", ()))
    return unit["learning_rate"] / 10**drops


def cpu_timed(fn, *args):
    """`fn(*args)` and the CPU seconds it took in this process (for work
    sent to other processes, whose CPU time the caller's does not count)."""
    start = time.process_time()
    return fn(*args), time.process_time() - start


class EpochData:
    """Each epoch's fresh examples, made ahead of time in worker processes.

    `make(*arguments(epoch))` gives epoch `epoch`'s data; with `workers`
    processes, the next `workers` epochs' are made while one trains. An
    epoch's data depends on its number alone, so a run gets the same
    examples with any number of workers, and a resumed run those it would
    have had. Labelling TSP tours with Or-opt costs a CPU core about as much
    as a training epoch, and a GPU's epoch far less than that.
    """

    def __init__(self, make, arguments, last_epoch, workers):
        self.make, self.arguments = make, arguments
        self.last_epoch, self.workers = last_epoch, workers
        self.pending = {}
        self.pool = None
        if workers:
            # Spawned, not forked: the training process runs JAX's threads.
            context = multiprocessing.get_context("spawn")
            self.pool = ProcessPoolExecutor(workers, mp_context=context)

    def __call__(self, epoch):
        """`(data, seconds)`: the epoch's data and the CPU seconds a worker
        spent on it (0 when made here, where the caller's clock counts it)."""
        if self.pool is None:
            return self.make(*self.arguments(epoch)), 0.0
        for ahead in range(epoch, min(epoch + self.workers, self.last_epoch) + 1):
            if ahead not in self.pending:
                arguments = self.arguments(ahead)
                self.pending[ahead] = self.pool.submit(cpu_timed, self.make, *arguments)
        return self.pending.pop(epoch).result()

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


def _pointer_epochs(unit, checkpoint, slice_epochs, clock, cache_dir):
    task, seed = unit["task"], unit["seed"]
    sizes = ptrnet.parse_sizes(unit["train_n"])
    keras.utils.set_random_seed(seed)
    model, layer = ptrnet.build_model(
        unit["units"], task == "tsp", "adam", unit["learning_rate"]
    )
    labels = unit.get("labels", "or-opt")
    make_split = planar_problems.make_split
    val = make_split(task, sizes, unit["val_size"], 100_000 + seed, labels)
    val_batches = ptrnet.Batches(val, unit["batch_size"], unit["pad_to"], seed)
    chunks = EpochData(
        make_split,
        lambda epoch: (task, sizes, unit["chunk"], seed * 10_000 + epoch, labels),
        unit["max_epochs"] - 1,
        unit["data_workers"],
    )

    def epoch_fn(epoch, state):
        model.optimizer.learning_rate.assign(pointer_learning_rate(unit, epoch))
        chunk, worker_seconds = chunks(epoch)
        state["cpu_seconds"] += worker_seconds  # this epoch's, made elsewhere
        batches = ptrnet.Batches(
            chunk, unit["batch_size"], unit["pad_to"], epoch, fill_last=True
        )
        losses = [
            float(np.asarray(model.train_on_batch(*batches[i])))
            for i in range(len(batches))
        ]
        val_loss = float(
            np.mean(
                [model.test_on_batch(*val_batches[i]) for i in range(len(val_batches))]
            )
        )

        def test():
            groups = pointer_test_groups(unit, cache_dir)
            metrics = ptrnet.evaluate(task, layer, groups, beam_size=unit["beam"])
            return {str(n): m for n, m in metrics.items()}

        return float(np.mean(losses)), val_loss, test

    try:
        line = run_epochs(
            unit,
            checkpoint,
            model,
            slice_epochs,
            clock,
            epoch_fn,
            lambda state: False,
            test_at_best=False,
        )
    finally:
        chunks.close()
    line.update(
        config=unit["config"],
        task=task,
        train_n=unit["train_n"],
        labels=labels if task == "tsp" else None,
        examples=line["epochs"] * unit["chunk"],
        val_metric="val NLL per output step",
        recipe=(
            f"LSTM {unit['units']}, batch {unit['batch_size']}, adam "
            f"{unit['learning_rate']:g}, clip 2, {unit['chunk']} fresh examples/epoch, "
            f"beam {unit['beam']}, full batches padded to multiples of "
            f"{unit['pad_to']}"
            + (f", {labels} tours above n = 10" if task == "tsp" else "")
            + "".join(
                f", learning rate / {10 ** (k + 1)} from epoch {drop + 1}"
                for k, drop in enumerate(unit.get("lr_drop_epochs", ()))
            )
        ),
    )
    return line
