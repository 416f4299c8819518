"""benchmarks.checkpoint_tuning: the budget, the stopping rule, and a run
scored at each checkpoint of a trainer that a test writes."""

import os
import sys
import textwrap
import types
import zipfile
from pathlib import Path

import pytest

from benchmarks import checkpoint_tuning as ct
from models.settings.json_files import read_json, write_json


def _table(*scores, every=391):
    return [
        {"step": every * (i + 1), "examples": 64 * every * (i + 1), "rouge1": score}
        for i, score in enumerate(scores)
    ]


def test_cap_and_checkpoints_are_keras_attn_members_in_steps_of_64():
    assert ct.CAP_EXAMPLES == 17 * 26_240 == 6_970 * 64
    assert ct.CHECKPOINT_EXAMPLES // ct.BATCH == 391


def test_grid_is_dropout_by_vocabulary():
    assert ct.grid_points() == {
        "dropout0.0-vocab50k": (0.0, (50_000, 1)),
        "dropout0.0-vocab10k": (0.0, (10_000, 2)),
        "dropout0.3-vocab50k": (0.3, (50_000, 1)),
        "dropout0.3-vocab10k": (0.3, (10_000, 2)),
    }


def test_a_run_stops_after_patience_checkpoints_without_a_better_one():
    cap = 391 * 18
    assert not ct.finished([], 5, cap)
    assert not ct.finished(_table(30, 31, 30, 30, 30, 30), 5, cap)
    assert ct.finished(_table(30, 31, 30, 30, 30, 30, 30), 5, cap)
    # An equal score is no better: the earliest best counts.
    assert ct.best_row(_table(30, 31, 31))["step"] == 782
    assert ct.finished(_table(31, 31, 31, 31, 31, 31), 5, cap)
    # At the cap, whatever the patience.
    assert ct.finished(_table(*range(18)), 5, cap)
    assert not ct.finished(_table(*range(17)), 5, cap)
    assert ct.best_row([]) is None


def test_the_best_of_runs_is_their_highest_best_row():
    summaries = {"a": {"best": {"rouge1": 30}}, "b": {"best": {"rouge1": 31}}}
    assert ct.best_of(summaries) == ("b", {"rouge1": 31})


def test_resume_scores_the_unscored_and_keeps_best_and_latest():
    table = _table(30, 33, 31)
    checkpoints = {step: f"model_step_{step}.pt" for step in (391, 782, 1173, 1564)}
    assert ct.pending(checkpoints, table) == [1564]
    # The best (782) is decoded in the search; the latest resumes training.
    assert ct.removable(checkpoints, table) == [391, 1173]
    assert ct.removable({}, []) == []


def test_a_checkpoint_is_saved_once_its_zip_is_whole(tmp_path):
    path = tmp_path / "model_step_391.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data.pkl", b"x" * 4096)
    assert ct.saved(path)
    (tmp_path / "partial.pt").write_bytes(path.read_bytes()[:-30])
    assert not ct.saved(tmp_path / "partial.pt")


# A trainer of `every`-step checkpoints up to `cap` steps, from `resume`'s
# step when given: each checkpoint a zip holding its step.
TRAINER = textwrap.dedent(
    """
    import sys, time, zipfile
    run_dir, every, cap, resume = sys.argv[1], *map(int, sys.argv[2:5])
    for step in range(resume + every, cap + every, every):
        step = min(step, cap)
        time.sleep(0.1)
        with zipfile.ZipFile(f"{run_dir}/step{step}.zip", "w") as archive:
            archive.writestr("step", str(step))
    """
)


class ToyRun(ct.ScoredRun):
    """A run of `TRAINER` whose dev ROUGE-1 at each step is `scores[step]`."""

    poll_s = 0.02

    def __init__(self, run_dir, args, scores):
        super().__init__(run_dir, args)
        self.scores, self.scored, self.commands = scores, [], []

    def checkpoints(self):
        found = ((int(p.stem[4:]), p) for p in self.dir.glob("step*.zip"))
        return dict(sorted(found))

    def command(self, resume):
        start = int(resume.stem[4:]) if resume else 0
        self.commands.append(start)
        every, cap = map(str, (self.every, self.cap_steps))
        return [sys.executable, "-c", TRAINER, self.dir, every, cap, start]

    def env(self):
        return None

    def score(self, path):
        with zipfile.ZipFile(path) as archive:
            step = int(archive.read("step"))
        self.scored.append(step)
        return self.scores[step], {"decode_s": 0.1}

    def remove(self, path):
        path.unlink()


def _args(**budget):
    values = {"checkpoint_examples": 640, "cap_examples": 6400, "patience": 2}
    return types.SimpleNamespace(**{**values, "dev_examples": 8, **budget})


def test_a_run_scores_each_checkpoint_and_stops_at_its_patience(tmp_path):
    scores = dict(
        zip(range(10, 110, 10), (20, 25, 26, 27, 30, 31, 31, 31, 31, 31), strict=True)
    )
    run = ToyRun(tmp_path / "run", _args(), scores)
    run.train()
    table = run.record["table"]
    # Steps 70 and 80 were no better than 60: stopped there, the trainer
    # terminated before its cap.
    assert [row["step"] for row in table] == [10, 20, 30, 40, 50, 60, 70, 80]
    assert ct.best_row(table) == {
        "step": 60,
        "examples": 3840,
        "rouge1": 31,
        "decode_s": 0.1,
    }
    assert run.finished() and run.commands == [0]
    # Only the best and the latest checkpoint are kept.
    assert set(run.checkpoints()) <= {60, 80, 90}
    assert 60 in run.checkpoints() and 80 in run.checkpoints()
    assert set(run.record["train_s"]) >= {"10", "60", "80"}
    assert run.examples_per_s() > 0


def test_a_run_given_a_higher_cap_trains_on_from_its_latest_checkpoint(tmp_path):
    scores = {step: step for step in range(10, 110, 10)}
    first = ToyRun(tmp_path / "run", _args(cap_examples=1920), scores)
    first.train()  # to its cap, 30 steps
    assert [row["step"] for row in first.record["table"]] == [10, 20, 30]
    again = ToyRun(tmp_path / "run", _args(cap_examples=3200), scores)
    again.train()
    assert again.commands == [30] and again.scored == [40, 50]
    assert [row["step"] for row in again.record["table"]] == [10, 20, 30, 40, 50]


def _checkpoint(run_dir, step, cut=False):
    path = run_dir / f"step{step}.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("step", str(step))
    if cut:  # a kill while it was written
        path.write_bytes(path.read_bytes()[:-10])


def test_a_killed_run_drops_a_cut_checkpoint_and_resumes(tmp_path):
    scores = {step: step for step in range(10, 110, 10)}
    run = ToyRun(tmp_path / "run", _args(cap_examples=3200), scores)
    # Killed after step 20's checkpoint (not yet scored), in step 30's save.
    run.dir.mkdir()
    run.record["table"] = [{"step": 10, "examples": 640, "rouge1": 10}]
    for step, cut in ((10, False), (20, False), (30, True)):
        _checkpoint(run.dir, step, cut)
    run.train()
    assert run.commands == [20] and run.record["resumed_at"] == [20]
    assert run.scored == [20, 30, 40, 50]  # 30 as the resumed trainer wrote it
    assert [row["step"] for row in run.record["table"]] == [10, 20, 30, 40, 50]


class ShortRun(ToyRun):
    """A trainer that ends after 20 steps, whatever the cap."""

    def command(self, resume):
        command = super().command(resume)
        command[-2] = "20"
        return command


def test_a_trainer_that_ends_before_the_run_is_finished_is_an_error(tmp_path):
    scores = {step: step for step in range(10, 110, 10)}
    run = ShortRun(tmp_path / "run", _args(), scores)
    with pytest.raises(SystemExit, match="exited with 0 before the run finished"):
        run.train()
    assert [row["step"] for row in run.record["table"]] == [10, 20]


class FailingScoreRun(ToyRun):
    def score(self, path):
        raise SystemExit("the decoder failed")


def test_a_failed_scoring_leaves_no_trainer_running(tmp_path):
    run = FailingScoreRun(tmp_path / "run", _args(), {})
    started = set(os.listdir("/proc"))
    with pytest.raises(SystemExit, match="the decoder failed"):
        run.train()
    left = {
        pid
        for pid in set(os.listdir("/proc")) - started
        if pid.isdigit() and TRAINER[:20] in _command_line(pid)
    }
    assert not left


def _command_line(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_a_run_resumed_with_other_settings_is_refused(tmp_path):
    ToyRun(tmp_path / "run", _args(), {}).save()
    with pytest.raises(SystemExit, match="every=10"):
        ToyRun(tmp_path / "run", _args(checkpoint_examples=1280), {})


def test_flags_must_be_known(capsys, tmp_path):
    parser = ct.tuning_parser(
        "Tunes.", "a peer", tmp_path, tmp_path, tmp_path / "o.json"
    )
    points = {"dropout0.0-vocab10k": {}, "dropout0.3-vocab10k": {}}
    args, stages = ct.parse_tuning_args(parser, points, ["--stages", "grid,test"])
    assert stages == ("grid", "test") and args.grid == tuple(points)
    assert args.cap_examples == 446_080 and args.patience == 5
    assert args.dev_examples == 1000 and args.test_examples == 1951
    for argv, said in (
        (["--stages", "grid,tune"], "Received: tune"),
        (["--grid", "dropout0.5-vocab10k"], "Received: dropout0.5-vocab10k"),
        (["--cap-examples", "640", "--checkpoint-examples", "1280"], "at most"),
        (["--checkpoint-examples", "32"], "at least 64"),
    ):
        with pytest.raises(SystemExit):
            ct.parse_tuning_args(parser, points, argv)
        assert said in capsys.readouterr().err


class ScoreRun:
    """A run whose best dev ROUGE-1 is its options' `score`; it records
    what it trained in `trained`."""

    trained = []

    def __init__(self, name, options, args):
        self.name, self.score = name, options["score"]

    def train(self):
        self.trained.append(self.name)

    def summary(self):
        return {"best": {"rouge1": self.score}}


def _stages(stages, grid, work_dir, report=False):
    ScoreRun.trained = []
    return ct.run_stages(
        types.SimpleNamespace(report=report, work_dir=work_dir),
        stages,
        grid,
        make_run=ScoreRun,
        extra_points=lambda name, options: {
            f"{name}-average": {"score": options["score"] + 1}
        },
        search=lambda args, runs: {"run": ct.best_of(runs)[0]},
        test=lambda args, chosen: f"test of {chosen}",
    )


def test_the_stages_run_the_grid_then_the_best_points_extras(tmp_path):
    grid = {"a": {"score": 30}, "b": {"score": 32}}
    result = _stages(("grid", "extras", "search", "test"), grid, tmp_path)
    assert ScoreRun.trained == ["a", "b", "b-average"]
    assert list(result["grid"]) == ["a", "b"] and list(result["extras"]) == [
        "b-average"
    ]
    assert result["search"] == {"run": "b-average", "runs": ["a", "b", "b-average"]}
    assert result["test"] == f"test of {result['search']}"


def test_a_search_without_the_extras_stage_reads_back_only_extras_begun(tmp_path):
    grid = {"a": {"score": 30}, "b": {"score": 32}}
    result = _stages(("search", "test"), grid, tmp_path)
    # Nothing of the extras trained: the search covers the grid alone.
    assert ScoreRun.trained == ["a", "b"]
    assert result["search"] == {"run": "b", "runs": ["a", "b"]}
    assert result["grid"] == {} and result["extras"] == {}
    (tmp_path / "b-average").mkdir()  # begun by an earlier `extras` stage
    result = _stages(("search",), grid, tmp_path)
    assert ScoreRun.trained == ["a", "b", "b-average"]  # resumed if unfinished
    assert result["search"] == {"run": "b-average", "runs": ["a", "b", "b-average"]}


def test_a_report_reads_the_runs_begun_and_trains_nothing(tmp_path):
    (tmp_path / "b").mkdir()
    grid = {"a": {"score": 30}, "b": {"score": 32}}
    result = _stages(ct.STAGES, grid, tmp_path, report=True)
    assert result == {"grid": {"b": {"best": {"rouge1": 32}}}}
    assert ScoreRun.trained == []


def _run(*examples, finished=False):
    return {
        "table": [{"examples": n, "rouge1": 20.0} for n in examples],
        "finished": finished,
    }


def test_a_record_outlives_a_run_begun_again_until_it_goes_further(tmp_path):
    path = tmp_path / "result.json"
    old_machine, new_machine = {"cpu": "old"}, {"cpu": "new"}
    write_json(
        path,
        {
            "machine": old_machine,
            "grid": {
                "a": _run(25_024, 50_048, finished=True),
                "b": _run(25_024, 50_048, 75_072),
                "c": _run(25_024),
            },
        },
    )
    # On a new machine: `a` and `b` begun again from nothing, `c` further.
    result = {
        "machine": new_machine,
        "grid": {
            "a": _run(25_024, 50_048, 75_072),
            "b": _run(25_024),
            "c": _run(25_024, 50_048),
            "d": _run(25_024),
        },
    }
    ct.record_result(path, result)
    grid = read_json(path)["grid"]
    assert grid["a"] == {**_run(25_024, 50_048, finished=True), "machine": old_machine}
    assert grid["b"] == {**_run(25_024, 50_048, 75_072), "machine": old_machine}
    assert grid["c"] == {**_run(25_024, 50_048), "machine": new_machine}
    assert grid["d"]["machine"] == new_machine
    assert read_json(path)["machine"] == new_machine
    # A finished run replaces a longer unfinished record.
    ct.record_result(
        path, {"machine": new_machine, "grid": {"b": _run(25_024, finished=True)}}
    )
    assert read_json(path)["grid"]["b"]["finished"]
    assert len(read_json(path)["grid"]["b"]["table"]) == 1
