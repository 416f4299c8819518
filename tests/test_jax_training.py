"""`train.py --backend jax` end to end, across its two processes: a
TensorFlow process prepares a tiny run, a process with JAX and no
TensorFlow trains its member (killed with SIGKILL and resumed in one run),
and TensorFlow exports and scores it.

This module runs in the TensorFlow leg; the JAX process is `jax_runs`'.
"""

import json
import re
import shutil
import signal
import subprocess
import time

import pytest

pytestmark = [pytest.mark.tf_only, pytest.mark.slow]

from e2e import run, train_command, write_org_data  # noqa: E402
from jax_runs import (  # noqa: E402
    FLAGS,
    assert_same_weights,
    backed_up_validations,
    finished,
    jax_process,
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The prepared run, trained once without a break (`run`) and once
    killed after its first validation and resumed (`killed`)."""
    tmp_path = tmp_path_factory.mktemp("jax")
    write_org_data(tmp_path / "data")
    prepared = run(train_command(tmp_path, *FLAGS))
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    assert "the data is prepared; jax is not installed here" in prepared.stderr
    run_dir = tmp_path / "run"
    shutil.copytree(run_dir, tmp_path / "killed")
    whole = jax_process(
        tmp_path, run_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    log = open(tmp_path / "killed.log", "w")  # noqa: SIM115
    killed = jax_process(tmp_path, tmp_path / "killed", stdout=log, stderr=log)
    metadata = tmp_path / "killed" / "backup" / "training_metadata.json"
    while killed.poll() is None and not backed_up_validations(metadata):
        time.sleep(0.5)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    log.close()
    assert killed.returncode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()
    whole_out = finished(whole)
    resumed_out = finished(
        jax_process(
            tmp_path,
            tmp_path / "killed",
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    )
    return tmp_path, whole_out, resumed_out


def test_the_jax_process_trains_without_tensorflow(runs):
    tmp_path, out, _ = runs
    assert "tensorflow imported: False" in out
    assert "member 1/1: training on jax (seed 0, from validation 1)" in out
    assert "validation 3 (192 examples): ROUGE-1" in out
    end = json.loads((tmp_path / "run" / "training_end.json").read_text())
    assert end["backend"] == "jax"
    assert (end["validations"], end["reason"]) == (3, "example_limit")


def test_a_killed_jax_process_resumes_to_the_same_weights(runs):
    tmp_path, _, resumed = runs
    assert "tensorflow imported: False" in resumed
    assert re.search("training on jax \\(seed 0, from validation [23]\\)", resumed)
    assert_same_weights(tmp_path / "run", tmp_path / "killed")


def test_tensorflow_exports_the_jax_member_with_its_validation_rouge(runs):
    import tensorflow as tf

    from models import data
    from models.scoring.metrics import mean_rouge
    from models.settings.data import DataSource

    tmp_path, _, _ = runs
    command = train_command(tmp_path, *FLAGS)
    command.remove("--backend")
    command.remove("jax")
    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "finished earlier (3 validations, example_limit, on jax)" in result.stderr
    version = tmp_path / "export" / "1"
    metrics = json.loads((version / "metrics.json").read_text())
    assert metrics["training"]["backend"] == "jax"
    # The export's greedy search on the validation ROUGE sample scores what
    # the JAX process's search scored with the same (best) weights.
    end = json.loads((tmp_path / "run" / "training_end.json").read_text())
    sample = json.loads((tmp_path / "run" / "prepared" / "rouge-4.json").read_text())
    pairs = list(
        data.load_split("validation", DataSource.recorded(tmp_path / "run"))
        .take(4)
        .as_numpy_iterator()
    )
    assert [s.decode() for _, s in pairs] == sample["references"]
    greedy = tf.saved_model.load(str(version)).signatures["greedy"]
    out = greedy(documents=tf.constant([d for d, _ in pairs]))
    headlines = [h.decode() for h in out["normalized_headlines"].numpy()]
    rouge1 = mean_rouge(headlines, sample["references"], ("rouge1",))["rouge1"]
    assert end["best"] > 0, (headlines, end)
    assert abs(rouge1 - end["best"]) <= 0.01, (headlines, end)
