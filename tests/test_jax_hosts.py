"""`train.py --backend jax` on two processes joined on loopback
(`--coordinator`, `--num-processes`, `--process-id`): a TensorFlow process
prepares a tiny run; two JAX processes train its member, each reading half
of every batch, process 0 keeping the run folder; killed after their first
validation and started again, they end with the weights of a pair never
cut.

This module runs in the TensorFlow leg, with the JAX Python of
tests/test_jax_training.py (`KERAS_ATTN_JAX_PYTHON`).
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

pytestmark = [pytest.mark.tf_only, pytest.mark.slow]

from e2e import ROOT, run, train_command, write_org_data  # noqa: E402
from jax_runs import (  # noqa: E402
    FLAGS,
    assert_same_weights,
    backed_up_validations,
    jax_python,
)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pair(tmp_path, run_dir, name):
    """The two processes on `run_dir`, logging to `<name>-<id>.log`."""
    command = train_command(tmp_path, *FLAGS)
    command[command.index("--run-dir") + 1] = str(run_dir)
    address = f"127.0.0.1:{_free_port()}"
    env = {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "JAX_DISABLE_MOST_OPTIMIZATIONS": "1",
    }
    processes = []
    for process in (1, 0):
        log = open(tmp_path / f"{name}-{process}.log", "w")  # noqa: SIM115
        hosts = ("--coordinator", address, "--num-processes", "2")
        processes.append(
            subprocess.Popen(
                [jax_python(), *command[1:], *hosts, "--process-id", str(process)],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    return processes


def _wait(tmp_path, processes, name):
    for process in processes:
        process.wait(timeout=600)
    logs = [(tmp_path / f"{name}-{k}.log").read_text() for k in (1, 0)]
    for process, log in zip(processes, logs, strict=True):
        assert process.returncode == 0, log[-3000:]
    return logs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("hosts")
    write_org_data(tmp_path / "data")
    prepared = run(train_command(tmp_path, *FLAGS))
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    shutil.copytree(tmp_path / "run", tmp_path / "killed")
    whole = _wait(tmp_path, _pair(tmp_path, tmp_path / "run", "whole"), "whole")
    killed = _pair(tmp_path, tmp_path / "killed", "killed")
    metadata = tmp_path / "killed" / "backup" / "training_metadata.json"
    while killed[1].poll() is None and not backed_up_validations(metadata):
        time.sleep(0.5)
    for process in killed:
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert process.returncode == -signal.SIGKILL
    resumed = _wait(tmp_path, _pair(tmp_path, tmp_path / "killed", "again"), "again")
    return tmp_path, whole, resumed


def test_two_processes_train_the_member_and_process_0_keeps_it(runs):
    tmp_path, whole, _ = runs
    assert "Process 1 of 2: 2 devices in all" in whole[0]
    assert "Process 0 of 2: 2 devices in all" in whole[1]
    assert "validation 3 (192 examples): ROUGE-1" in whole[1]
    end = json.loads((tmp_path / "run" / "training_end.json").read_text())
    assert (end["validations"], end["reason"], end["backend"]) == (
        3,
        "example_limit",
        "jax",
    )
    assert (tmp_path / "run" / "model.keras").is_file()


def test_a_killed_pair_resumes_to_the_same_weights(runs):
    tmp_path, _, resumed = runs
    for log in resumed:
        assert re.search("training on jax \\(seed 0, from validation [23]\\)", log)
    assert_same_weights(tmp_path / "run", tmp_path / "killed")
