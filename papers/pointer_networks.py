"""Pointer Networks on planar convex hulls and the travelling salesman problem.

Vinyals, Fortunato & Jaitly (2015) train `keras_attn.PointerNetwork` (an LSTM
encoder, an LSTM decoder whose attention over the input points is the
output) on two tasks whose output dictionary is the input itself:

* `hull`: the convex hull of `n` points. Target: the hull's points starting
  from the lowest input index, counter-clockwise, then END.
* `tsp`: a shortest closed tour through `n` cities. Target: the tour from the
  first city (index 0), in its counter-clockwise direction, then END. For
  `n <= 10` the tour is optimal (Held-Karp, exact); above, it comes from a
  local search (`--labels`): `or-opt` (the default: 2-opt and Or-opt moves
  from 5 random starts, within 0.02% of the optimum at `n = 20`) or `2-opt`
  (from the nearest-neighbour tour, 1.7% over). Exact Held-Karp at `n = 20`
  needs `20 * 2^19` states per instance, too slow in numpy for training sets.
  `papers/planar_problems.py` holds the data and the solvers.

Data as in the paper: points uniform in `[0, 1]^2`, a fixed seed per split.
A training set with a range of sizes (`--train-n 5-50`) has as many examples
of each size; batches hold one size range (`--pad-to`: sizes are padded up
to a multiple of it, so few shapes are compiled, and the padding is masked).

Metrics (on `--test-size` examples of each `--test-n`):

* hull: *accuracy*, the share of outputs equal to the true hull as a cyclic
  sequence (any starting point, same counter-clockwise order: the paper's
  "exactly correct"); *area*, the mean of area(output) / area(true hull)
  over the outputs that are simple polygons (3+ distinct points, no two
  non-adjacent edges meeting); *FAIL* when over 1% of the outputs are not
  simple polygons (the paper's rule).
* tsp: the mean length of the output tours. The search only considers valid
  tours (`PointerNetwork.decode(permutation=True)`: no city twice, END only
  after every city), so every output is valid; also the mean length of the
  reference tours (optimal for `n <= 10`).

Usage:

```
python -m papers.pointer_networks hull --train-n 5-50 --test-n 5,10,50
python -m papers.pointer_networks tsp --train-n 5-10 --test-n 5,10 --beam 5
python -m papers.pointer_networks hull --quick       # a smoke run
```
"""

import json
import time
from pathlib import Path

import keras
import numpy as np
from keras import ops

import keras_attn as ka
from models.settings.flags import SettingsParser, check_flags
from papers.planar_problems import (
    TSP_LABELS,
    is_simple_polygon,
    make_split,
    signed_area,
    tour_length,
)
from papers.records import OUTPUT

# ------------------------------------------------------------------ metrics


def cyclic_equal(pred, true):
    """Whether `pred` is `true` up to its starting point (same direction)."""
    pred, true = list(pred), list(true)
    if len(pred) != len(true):
        return False
    if not true:
        return True
    doubled = true + true
    return any(doubled[s : s + len(true)] == pred for s in range(len(true)))


def hull_metrics(points, predictions, targets):
    """Accuracy, area coverage (simple polygons only) and the non-simple share.

    Args:
        points: `(B, n, 2)`.
        predictions, targets: Lists of 0-based index sequences (no END).
    """
    correct, coverage, not_simple = 0, [], 0
    for p, pred, true in zip(points, predictions, targets, strict=True):
        correct += cyclic_equal(pred, true)
        if is_simple_polygon(p, pred):
            coverage.append(abs(signed_area(p, pred)) / abs(signed_area(p, true)))
        else:
            not_simple += 1
    total = len(targets)
    return {
        "accuracy": correct / total,
        "area": float(np.mean(coverage)) if coverage else float("nan"),
        "not_simple": not_simple / total,
        "fail": not_simple / total > 0.01,
    }


# ------------------------------------------------------------------ batches


def parse_sizes(text):
    """`"5-50"` -> [5, ..., 50]; `"5,10"` -> [5, 10]."""
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(x) for x in text.split(",")]


def _pad_batch(points, targets, width):
    """Points padded to `width`, their mask, and targets as positions + END.

    `points` is a list of `(n_b, 2)` arrays (their sizes may differ) and
    `targets` their target position lists.
    """
    batch = len(points)
    padded = np.zeros((batch, width, 2), "float32")
    mask = np.zeros((batch, width), bool)
    out = np.full((batch, width + 1), -1, "int32")
    for b, (p, t) in enumerate(zip(points, targets, strict=True)):
        padded[b, : len(p)] = p
        mask[b, : len(p)] = True
        out[b, : len(t)] = np.asarray(t) + 1
        out[b, len(t)] = ka.networks.pointer_network.END
    return padded, mask, out


class Batches:
    """Shuffled batches, each padded up to a multiple of `pad_to`.

    The sizes whose padded width is the same share batches, so that a width
    is one batch shape rather than one per size. With `fill_last`, the last
    batch of a width is topped up with that width's first examples (when it
    has `batch_size` of them), so that every batch has `batch_size` rows:
    each new shape compiles a training step of its own (on JAX, and in a
    `tf.function`). Batched one size at a time, 20,000 hulls over n = 5-50
    (46 sizes, each ending in a short batch) made 20 shapes; filled, 10. An
    epoch then sees at most `batch_size - 1` examples of each width twice.

    Batches have different shapes, so they go to `train_on_batch` one by one
    (`fit`'s dataset adapters expect one shape on TensorFlow).
    """

    def __init__(self, groups, batch_size, pad_to, seed, fill_last=False):
        rows_by_width = {}
        for k, g in enumerate(groups):
            width = -(-g["n"] // pad_to) * pad_to
            rows = rows_by_width.setdefault(width, [])
            rows.extend((k, i) for i in range(len(g["points"])))
        self.groups = groups
        self.items = []
        for width, rows in sorted(rows_by_width.items()):
            for start in range(0, len(rows), batch_size):
                chunk = rows[start : start + batch_size]
                if fill_last and len(rows) >= batch_size:
                    chunk = chunk + rows[: batch_size - len(chunk)]
                self.items.append((width, chunk))
        self.batch_size, self.pad_to = batch_size, pad_to
        self.rng = np.random.default_rng(seed)
        self.shuffle()

    def shuffle(self):
        self.order = self.rng.permutation(len(self.items))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        width, rows = self.items[self.order[index]]
        points = [self.groups[k]["points"][i] for k, i in rows]
        targets = [self.groups[k]["targets"][i] for k, i in rows]
        points, mask, targets = _pad_batch(points, targets, width)
        return (points, targets, mask), targets


def train(model, batches, epochs, max_steps=None, max_seconds=None, progress=True):
    """Trains `epochs` epochs, reshuffling the batches between them.

    Args:
        model: `build_model`'s model.
        batches: `Batches`.
        epochs: Passes over the batches.
        max_steps: Stop after this many steps (None: no limit).
        max_seconds: Stop after the step that passes this many wall seconds
            (None: no limit); what a run trains then depends on the machine.
        progress: Print the loss every 50 steps.

    Returns:
        `(steps, last loss, seconds)`.
    """
    start, steps, loss = time.perf_counter(), 0, None
    for epoch in range(epochs):
        if epoch:
            batches.shuffle()
        for index in range(len(batches)):
            x, y = batches[index]
            loss = float(np.asarray(model.train_on_batch(x, y)))
            steps += 1
            elapsed = time.perf_counter() - start
            if progress and steps % 50 == 0:
                print(f"step {steps}: loss {loss:.4f} ({elapsed:.0f} s)", flush=True)
            over_time = max_seconds is not None and elapsed > max_seconds
            if over_time or (max_steps and steps >= max_steps):
                return steps, loss, elapsed
    return steps, loss, time.perf_counter() - start


# ------------------------------------------------------------------ model


def build_model(units, mask_chosen, optimizer="adam", learning_rate=None):
    """A functional model `[points, targets, mask] -> log-probs`, and its layer."""
    points = keras.Input((None, 2), name="points")
    targets = keras.Input((None,), dtype="int32", name="targets")
    mask = keras.Input((None,), dtype="bool", name="mask")
    layer = ka.PointerNetwork(units, mask_chosen=mask_chosen, name="pointer_network")
    model = keras.Model(
        [points, targets, mask], layer([points, targets], points_mask=mask)
    )
    # The paper: SGD at 1.0, gradients clipped at norm 2.0.
    if optimizer == "sgd":
        opt = keras.optimizers.SGD(learning_rate or 1.0, clipnorm=2.0)
    else:
        opt = keras.optimizers.Adam(learning_rate or 1e-3, clipnorm=2.0)
    model.compile(optimizer=opt, loss=lambda y, p: ka.pointer_network_nll(p, y))
    return model, layer


def decode(layer, points, beam_size, permutation, batch_size=250, processors=()):
    """0-based index sequences decoded for `points` `(B, n, 2)`."""
    out = []
    for start in range(0, len(points), batch_size):
        chunk = points[start : start + batch_size]
        result = layer.decode(
            chunk, beam_size=beam_size, permutation=permutation, processors=processors
        )
        ids = ops.convert_to_numpy(result.ids)
        lengths = ops.convert_to_numpy(result.lengths)
        out += [
            list(row[:length] - 1) for row, length in zip(ids, lengths, strict=True)
        ]
    return out


def evaluate(task, layer, test_groups, beam_size):
    """Metrics per test size.

    The search keeps to valid outputs, as the paper's did for TSP: tours
    are permutations, and a hull names no point twice (`NoRepeatNgram(1)`).
    """
    results = {}
    # A hull never visits a vertex twice; it may leave points out.
    no_repeat = (ka.NoRepeatNgram(1),) if task == "hull" else ()
    for g in test_groups:
        start = time.perf_counter()
        preds = decode(
            layer, g["points"], beam_size, task == "tsp", processors=no_repeat
        )
        if task == "hull":
            metrics = hull_metrics(g["points"], preds, g["targets"])
        else:
            lengths = [
                tour_length(p, t) for p, t in zip(g["points"], preds, strict=True)
            ]
            metrics = {
                "tour_length": float(np.mean(lengths)),
                "reference_length": float(np.mean(g["ref"])),
                "reference": g["reference"],
            }
        metrics["decode_seconds"] = time.perf_counter() - start
        results[g["n"]] = metrics
    return results


def run(
    task,
    train_n,
    test_n,
    train_size=10000,
    test_size=500,
    units=128,
    batch_size=128,
    pad_to=10,
    epochs=20,
    max_steps=None,
    max_minutes=None,
    beam_size=1,
    optimizer="adam",
    learning_rate=None,
    seed=0,
    output=None,
    progress=True,
    labels="or-opt",
):
    """Builds the data, trains `epochs` epochs, evaluates each test size.

    `max_steps` and `max_minutes` (wall) stop training early when given.

    Returns:
        A dict: the settings (with TSP's `labels`), `train_steps`,
        `train_seconds`, `final_loss`, `data_seconds` and `results` (metrics
        per test size).
    """
    if task not in ("hull", "tsp"):
        raise ValueError(f"`task` must be 'hull' or 'tsp'. Received: task={task!r}")
    keras.utils.set_random_seed(seed)
    start = time.perf_counter()
    train_groups = make_split(task, train_n, train_size, seed + 1, labels)
    test = make_split(task, test_n, test_size * len(test_n), seed + 2, labels)
    data_seconds = time.perf_counter() - start
    model, layer = build_model(units, task == "tsp", optimizer, learning_rate)
    steps, loss, train_seconds = train(
        model,
        Batches(train_groups, batch_size, pad_to, seed, fill_last=True),
        epochs,
        max_steps,
        None if max_minutes is None else 60 * max_minutes,
        progress,
    )
    result = {
        "task": task,
        "train_n": f"{min(train_n)}-{max(train_n)}",
        "train_size": train_size,
        "epochs": epochs,
        "units": units,
        "batch_size": batch_size,
        "optimizer": optimizer,
        "beam_size": beam_size,
        "backend": keras.backend.backend(),
        "data_seconds": data_seconds,
        "train_steps": steps,
        "train_seconds": train_seconds,
        "final_loss": loss,
        "labels": labels if task == "tsp" else None,
        "results": evaluate(task, layer, test, beam_size),
    }
    if output is not None:
        output = Path(output)
        output.mkdir(parents=True, exist_ok=True)
        (output / f"{task}.json").write_text(
            json.dumps(result, indent=2, default=float)
        )
    return result


def main(argv=None):
    parser = SettingsParser(
        prog="python -m papers.pointer_networks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("task", choices=["hull", "tsp"])
    parser.add_argument("--train-n", default=None, help="e.g. 5-50 or 5,10")
    parser.add_argument("--test-n", default=None, help="e.g. 5,10,50")
    parser.add_argument("--train-size", type=int, default=10000)
    parser.add_argument("--test-size", type=int, default=500)
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--pad-to", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="stop training after this many wall minutes (no cap by default)",
    )
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    parser.add_argument("--learning-rate", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--labels",
        choices=TSP_LABELS,
        default="or-opt",
        help="tsp: the local search that finds the tours above 10 cities",
    )
    parser.add_argument("--output", type=Path, default=OUTPUT / "pointer_networks")
    parser.add_argument("--quick", action="store_true", help="a tiny smoke run")
    args = parser.parse_args(argv)
    sizes = ("train_size", "test_size", "units", "batch_size", "pad_to", "epochs")
    check_flags(
        parser,
        args,
        at_least={**dict.fromkeys(sizes, 1), "max_steps": 1, "beam": 1},
        above={"max_minutes": 0, "learning_rate": 0},
    )
    defaults = {"hull": ("5-50", "5,10,50"), "tsp": ("5-10", "5,10")}[args.task]
    try:
        train_n = parse_sizes(args.train_n or defaults[0])
        test_n = parse_sizes(args.test_n or defaults[1])
    except ValueError:
        parser.error(
            "`--train-n` and `--test-n` must be sizes (5-50 or 5,10). "
            f"Received: --train-n={args.train_n} --test-n={args.test_n}"
        )
    if args.quick:
        args.train_size, args.test_size, args.units, args.max_steps = 256, 20, 16, 5
    result = run(
        args.task,
        train_n,
        test_n,
        train_size=args.train_size,
        test_size=args.test_size,
        units=args.units,
        batch_size=args.batch_size,
        pad_to=args.pad_to,
        epochs=args.epochs,
        max_steps=args.max_steps,
        max_minutes=args.max_minutes,
        beam_size=args.beam,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        seed=args.seed,
        output=args.output,
        labels=args.labels,
    )
    print(json.dumps(result, indent=2, default=float))


if __name__ == "__main__":
    main()
