"""The papers' runner (`papers.runner`, `papers.units`, `papers.tables`): skip
and resume, checkpoints, and the rendered tables."""

import json
import os

import keras
import numpy as np
import pytest

from papers import entity_networks as entnet
from papers import planar_problems, records, runner, tables
from papers import units as paper_units

MACHINE = {"cpu": "Test CPU", "flags": [], "cores": 2, "accelerator": "none"}


class FakeClock:
    def __init__(self, expire_after=None):
        self.calls, self.expire_after = 0, expire_after

    def expired(self):
        self.calls += 1
        return self.expire_after is not None and self.calls > self.expire_after


def _babi_line(task, seed, status, val, test, epochs, subset="en-10k"):
    return {
        "unit": f"babi/task{task}/seed{seed}",
        "group": f"babi/task{task}",
        "seed": seed,
        "status": status,
        "val_error": val,
        "test_error": test,
        "epochs": epochs,
        "best_epoch": epochs,
        "curve": [[1.0, 0.09]] + [[0.5, val]] * (epochs - 1),
        "cpu_seconds": 120.0,
        "subset": subset,
        "n_train": 9000,
        "n_val": 1000,
        "machine": MACHINE,
        "backend": "tensorflow",
    }


def _fake_trainer(progress, val_at_end):
    """A unit of 3 epochs that remembers its epoch between visits."""

    def train_unit(unit, slice_epochs, clock):
        start = progress.get(unit["unit"], 0)
        end = min(3, start + (slice_epochs or 3))
        progress[unit["unit"]] = end
        status = "done" if end == 3 else "partial"
        val = val_at_end[unit["unit"]] if end == 3 else 0.5
        line = _babi_line(unit["task"], unit["seed"], status, val, val, end)
        return {**line, "max_epochs": 3}

    return train_unit


def test_runner_slices_resumes_and_skips_done_units(tmp_path):
    path = tmp_path / "babi.jsonl"
    units = paper_units.babi_units([1, 2], [0, 1], max_epochs=3)
    assert [u["unit"] for u in units] == [
        "babi/task1/seed0",
        "babi/task2/seed0",
        "babi/task1/seed1",
        "babi/task2/seed1",
    ]
    progress = {}
    # Task 1 reaches 0% validation error with seed 0: seed 1 is not needed.
    val = {"babi/task1/seed0": 0.0, "babi/task2/seed0": 0.1, "babi/task2/seed1": 0.2}
    trainer = _fake_trainer(progress, val)
    # The budget expires after the first visit of the first three units.
    first = runner.run_units(
        units, path, trainer, FakeClock(expire_after=4), slice_epochs=2, log=str
    )
    assert [(r["unit"], r["status"], r["epochs"]) for r in first] == [
        ("babi/task1/seed0", "partial", 2),
        ("babi/task2/seed0", "partial", 2),
        ("babi/task1/seed1", "partial", 2),
    ]
    second = runner.run_units(units, path, trainer, FakeClock(), 2, log=str)
    assert [(r["unit"], r["status"], r["epochs"]) for r in second] == [
        ("babi/task1/seed0", "done", 3),
        ("babi/task2/seed0", "done", 3),
        ("babi/task2/seed1", "partial", 2),
        ("babi/task2/seed1", "done", 3),
    ]
    # Everything is done or settled: a third invocation trains nothing.
    assert runner.run_units(units, path, trainer, FakeClock(), 2, log=str) == []
    latest = records.latest_by_unit(records.read_results(path))
    assert len(records.read_results(path)) == 7
    assert latest["babi/task1/seed1"]["status"] == "partial"
    assert latest["babi/task2/seed1"]["val_error"] == 0.2
    # A unit done under a smaller epoch limit goes on under a larger one.
    more = [{**u, "max_epochs": 4} for u in units]
    assert [
        r["unit"]
        for r in runner.run_units(more, path, trainer, FakeClock(), 2, log=str)
    ] == ["babi/task2/seed0", "babi/task2/seed1"]


def test_checkpoint_restores_weights_and_optimizer(tmp_path):
    def model_and_step(seed):
        keras.utils.set_random_seed(seed)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        model.compile(optimizer=keras.optimizers.Adam(0.1), loss="mse")
        return model

    x, y = np.ones((4, 3), "float32"), np.zeros((4, 2), "float32")
    model = model_and_step(0)
    model.train_on_batch(x, y)
    checkpoint = paper_units.Checkpoint(tmp_path / "unit")
    assert checkpoint.load(model) is None
    checkpoint.save(model, {"epoch": 1})
    model.train_on_batch(x, y)
    expected = [np.array(w) for w in model.get_weights()]

    resumed = model_and_step(1)
    assert checkpoint.load(resumed) == {"epoch": 1}
    resumed.train_on_batch(x, y)
    for got, want in zip(resumed.get_weights(), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_run_epochs_resumes_from_the_last_epoch(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    unit = {"unit": "babi/task1/seed0", "group": "babi/task1", "seed": 0}
    unit["max_epochs"] = 4
    vals = [0.3, 0.2, 0.25, 0.1]
    seen = []

    def epoch_fn(epoch, state):
        seen.append(epoch)
        return 1.0 / (epoch + 1), vals[epoch], lambda: {"error": vals[epoch] + 0.01}

    checkpoint = paper_units.Checkpoint(tmp_path / "c")

    def visit(slice_epochs):
        return paper_units.run_epochs(
            unit, checkpoint, model, slice_epochs, FakeClock(), epoch_fn,
            lambda state: False, test_at_best=True,
        )  # fmt: skip

    partial = visit(3)
    assert partial["status"] == "partial" and partial["epochs"] == 3
    assert (partial["val_error"], partial["best_epoch"]) == (0.2, 2)
    assert partial["test_error"] == pytest.approx(0.21)
    done = visit(3)
    assert seen == [0, 1, 2, 3]
    assert done["status"] == "done" and done["best_epoch"] == 4
    assert done["test_error"] == pytest.approx(0.11)
    assert [v for _, v in done["curve"]] == vals


def test_babi_table_counts_runs_and_compares_with_the_paper():
    lines = [
        _babi_line(1, 0, "done", 0.0, 0.0, 4),
        _babi_line(2, 0, "done", 0.08, 0.09, 200),
        _babi_line(2, 1, "partial", 0.02, 0.03, 10),
        _babi_line(3, 0, "partial", 0.2, 0.25, 7, subset="en"),
    ]
    table = tables.babi_table(lines)
    rows = {r.split("|")[1].strip(): r for r in table.splitlines() if r.startswith("|")}
    # Task 2: the best run is seed 1 (lower validation error), still partial.
    cells = [c.strip() for c in rows["2"].split("|")[1:-1]]
    assert cells[:6] == [
        "2",
        "en-10k (9000 + 1000 val)",
        "3.0",
        "0.1",
        "2.0",
        "10 (10)*",
    ]
    assert rows["2"].endswith("| e1 9.0, e10 2.0 | 2 (1 done) | 210 | 4 |")
    assert "| 4 | not run | | 0.0 | | | | | | |" in table
    # Failed and mean over the two 10k tasks run; task 3 apart.
    assert "| 2 of 19 | **0** | 0 | | | | | | |" in table
    assert "| 2 of 19 | **1.5** | 0.1 | | | | | | |" in table
    assert all(r.count("|") == 11 for r in table.splitlines() if r.startswith("|"))
    assert "25.0% test error" in table
    assert "Test CPU (tensorflow)" in table


def test_render_replaces_only_between_the_markers(tmp_path):
    docs = tmp_path / "docs" / "deep"
    docs.mkdir(parents=True)
    page = docs / "page.md"
    page.write_text(
        "intro\n<!-- results:babi:start -->\nold table\n"
        "<!-- results:babi:end -->\noutro\n<!-- results:tsp:start -->\nold\n"
        "<!-- results:tsp:end -->\n"
    )
    (tmp_path / "README.md").write_text("no markers\n")
    babi = tmp_path / "babi.jsonl"
    babi.write_text(json.dumps(_babi_line(1, 0, "done", 0.0, 0.01, 3)) + "\n")
    tsp = {
        **_babi_line(1, 0, "partial", 0.5, None, 2),
        "unit": "pointer/tsp-5-20/seed0",
        "group": "pointer/tsp-5-20",
        "task": "tsp",
        "train_n": "5-20",
        "labels": "or-opt",
        "examples": 40000,
        "test": {"10": {"tour_length": 2.93, "reference_length": 2.87}},
    }
    pointer = tmp_path / "pointer.jsonl"
    pointer.write_text(json.dumps(tsp) + "\n")
    changed = tables.render_all(tmp_path, babi, pointer)
    assert changed == [page]
    text = page.read_text()
    assert text.startswith("intro\n<!-- results:babi:start -->\n| Task |")
    assert "old" not in text and text.count("results:") == 4
    assert "\noutro\n" in text
    assert (
        "| 5-20 | 10 | or-opt | 2.93 | 2.87 | 2.1 | 2.87 / 2.87 | 40,000* "
        "| e1 0.090, e2 0.500 |" in text
    )
    tsp_section = text.split("results:tsp:start -->")[1]
    tsp_rows = [r for r in tsp_section.splitlines() if r.startswith("|")]
    assert len(tsp_rows) == 3 and all(r.count("|") == 13 for r in tsp_rows)
    assert tables.render_all(tmp_path, babi, pointer) == []
    # No convex hull results yet: its section keeps what it had.
    page.write_text(
        "<!-- results:convex_hull:start -->\nkept\n<!-- results:convex_hull:end -->\n"
    )
    assert tables.render_all(tmp_path, babi, pointer) == []
    assert "kept" in page.read_text()


def test_a_unit_held_by_another_live_process_is_left_alone(tmp_path, monkeypatch):
    unit = paper_units.babi_units([1], [0])[0]
    directory = tmp_path / unit["unit"]
    directory.mkdir(parents=True)
    (directory / "lock").write_text(str(os.getppid()))  # alive, not us
    context = {"checkpoints": tmp_path}
    assert paper_units.train(unit, 1, FakeClock(), context) is None
    # A lock left by a dead process is taken over, and released after.
    (directory / "lock").write_text("999999999")
    monkeypatch.setattr(paper_units, "_babi_epochs", lambda *a: {"status": "done"})
    context.update(machine=MACHINE, backend="b", command="c", commit="x")
    assert paper_units.train(unit, 1, FakeClock(), context)["status"] == "done"
    assert not (directory / "lock").exists()


def test_babi_clip_modes_sum_the_loss_and_clip_the_global_norm():
    """`summed-global`, the authors' code: the batch's loss is the sum over its
    examples and the whole gradient's norm is clipped at 40; `per-variable`
    keeps the mean and Keras' per-variable `clipnorm`."""
    units = paper_units.babi_units([16], [0, 1], clip="summed-global")
    assert [u["unit"] for u in units] == [
        "babi/task16/seed0/summed-global",
        "babi/task16/seed1/summed-global",
    ]
    assert {u["group"] for u in units} == {"babi/task16"}
    assert paper_units.babi_units([16], [0])[0]["unit"] == "babi/task16/seed0"
    with pytest.raises(ValueError, match="Received: clip='global'"):
        paper_units.babi_units([16], [0], clip="global")

    x = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]], "float32")
    y = np.array([0, 1, 1])
    logits = x @ np.array([[1.0, -1.0], [0.5, 2.0]], "float32")
    per_example = np.log(np.exp(logits).sum(1)) - logits[np.arange(3), y]
    losses = {}
    for clip in paper_units.BABI_CLIPS:
        model = keras.Sequential(
            [keras.Input((2,)), keras.layers.Dense(2, use_bias=False)]
        )
        model.set_weights([np.array([[1.0, -1.0], [0.5, 2.0]], "float32")])
        paper_units.babi_compile(model, clip)
        losses[clip] = float(model.evaluate(x, y, batch_size=3, verbose=0))
        summed = clip == "summed-global"
        assert model.optimizer.global_clipnorm == (40.0 if summed else None)
        assert model.optimizer.clipnorm == (None if summed else 40.0)
    np.testing.assert_allclose(losses["summed-global"], per_example.sum(), rtol=1e-5)
    np.testing.assert_allclose(losses["per-variable"], per_example.mean(), rtol=1e-5)


def test_babi_biases_units_build_the_authors_memory():
    """`--biases`: units named `.../biases`, whose model has the memory's
    gate and candidate biases; without it the model has the weights of the
    earlier runs, in their order, so their checkpoints still load."""
    units = paper_units.babi_units([16], [3], clip="summed-global", biases=True)
    assert [u["unit"] for u in units] == ["babi/task16/seed3/summed-global/biases"]
    assert units[0]["biases"] is True
    assert paper_units.babi_units([16], [3])[0]["biases"] is False

    names = {}
    for use_bias in (False, True):
        model, _ = entnet.build_model(10, 4, dim=6, slots=3, use_bias=use_bias)
        names[use_bias] = [w.path.split("/")[-1] for w in model.weights]
    assert names[False] == [
        "embeddings",
        "position_mask",
        "position_mask",
        "keys",
        "slot_kernel",
        "key_kernel",
        "input_kernel",
        "alpha",
        "hidden_kernel",
        "output_kernel",
    ]
    assert names[True] == names[False][:8] + ["gate_bias", "bias"] + names[False][8:]


def test_babi_learning_rate_schedules():
    """`halving` halves 0.01 every 25 epochs; `cyclic` climbs from 2e-4 to
    1e-2 over 10 epochs, batch by batch, and back down over the next 10."""
    rate = paper_units.babi_learning_rate
    assert [rate("halving", e, 7, 100) for e in (0, 24, 25, 50)] == [
        0.01,
        0.01,
        0.005,
        0.0025,
    ]
    cyclic = [
        rate("cyclic", e, s, 100)
        for e, s in ((0, 0), (5, 0), (10, 0), (15, 50), (20, 0))
    ]
    np.testing.assert_allclose(cyclic, [2e-4, 5.1e-3, 1e-2, 4.61e-3, 2e-4], rtol=1e-9)
    units = paper_units.babi_units([16], [0], schedule="cyclic")
    assert units[0]["unit"] == "babi/task16/seed0/cyclic"
    with pytest.raises(ValueError, match="Received: schedule='step'"):
        paper_units.babi_units([16], [0], schedule="step")


def test_pointer_units_pad_and_drop_the_learning_rate_as_asked():
    """`--lr-drop-epoch 136 161`: epochs 0-135 (from 0) at the recipe's
    rate, the 137th to the 161st at a tenth, the 162nd on at a hundredth;
    `--pad-to` and `--max-epochs` reach the unit, whose name (its
    checkpoint) stays the same."""
    (plain,) = paper_units.pointer_units(["hull-5-50"], [0])
    (unit,) = paper_units.pointer_units(["hull-5-50"], [0], 180, 50, [161, 136])
    assert unit["unit"] == plain["unit"] == "pointer/hull-5-50/seed0"
    assert (plain["pad_to"], plain["max_epochs"]) == (5, 50)
    assert (unit["pad_to"], unit["max_epochs"], unit["beam"]) == (50, 180, 5)
    rate = paper_units.pointer_learning_rate
    assert [rate(plain, e) for e in (0, 136, 179)] == [1e-3, 1e-3, 1e-3]
    np.testing.assert_allclose(
        [rate(unit, e) for e in (0, 135, 136, 160, 161, 179)],
        [1e-3, 1e-3, 1e-4, 1e-4, 1e-5, 1e-5],
        rtol=1e-12,
    )
    args = ["pointer", "--configs", "hull-5-50", "--pad-to", "50"]
    parsed = runner.argument_parser().parse_args(
        args + ["--lr-drop-epoch", "136", "161"]
    )
    assert (parsed.pad_to, parsed.lr_drop_epoch) == (50, [136, 161])


def test_epoch_data_made_ahead_is_what_each_epoch_makes():
    """Two worker processes making the coming epochs' data give each epoch
    what the training process would have made, and nothing past the last."""
    made = [
        paper_units.EpochData(
            planar_problems.make_points, lambda epoch: (2, 3, epoch), 5, workers
        )
        for workers in (0, 2)
    ]
    try:
        for epoch in (2, 3, 4, 5):  # a run resumed at epoch 2
            (plain, _), (ahead, _) = made[0](epoch), made[1](epoch)
            np.testing.assert_array_equal(ahead, plain)
            np.testing.assert_array_equal(
                plain, planar_problems.make_points(2, 3, epoch)
            )
        assert made[1].pending == {}
    finally:
        for data in made:
            data.close()


def test_an_interrupted_result_line_leaves_the_earlier_lines(tmp_path, monkeypatch):
    path = tmp_path / "results" / "babi.jsonl"
    first = _babi_line(1, 0, "done", 0.1, 0.1, 3)
    records.append_result(path, first)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        records.append_result(path, _babi_line(1, 1, "partial", 0.2, 0.2, 2))
    assert records.read_results(path) == [first]
    assert os.listdir(path.parent) == ["babi.jsonl"]
    monkeypatch.undo()
    records.append_result(path, _babi_line(1, 1, "partial", 0.2, 0.2, 2))
    assert [r["seed"] for r in records.read_results(path)] == [0, 1]
