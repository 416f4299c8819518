"""`train.py --strategy multi_worker`: a two-worker cluster on loopback.

Each worker is its own process with its own `TF_CONFIG`, as on two
machines; each prepares the dataset in its own `--tfds-dir`. They share
`--run-dir` and `--export-dir`, which only the chief writes to.
"""

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import h5py
import keras
import numpy as np
import pytest
from e2e import ROOT, train_command, write_org_data

from models.model.summarizer import HeadlineSummarizer
from models.training.callbacks import backed_up_state

pytestmark = [pytest.mark.tf_only, pytest.mark.slow]

# train.py's main, and after training each worker's weights and optimizer
# state saved to the .npz file named by the first argument.
WORKER = r"""
import sys

import numpy as np

import train
from models.training import fit as training

fit = training.fit


def fit_and_dump(model, *args, **kwargs):
    history = fit(model, *args, **kwargs)
    np.savez(
        sys.argv[1],
        weights=np.array([v.numpy() for v in model.weights], dtype=object),
        iterations=int(model.optimizer.iterations.numpy()),
    )
    return history


training.fit = fit_and_dump
sys.exit(train.main(sys.argv[2:]))
"""


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start_cluster(tmp_path, *extra):
    """Starts both workers; returns their processes, chief first."""
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    processes = []
    for index in range(2):
        folder = tmp_path / f"worker{index}"
        (folder / "tmp").mkdir(parents=True, exist_ok=True)
        tf_config = {
            "cluster": {"worker": workers},
            "task": {"type": "worker", "index": index},
        }
        env = {
            **os.environ,
            "KERAS_BACKEND": "tensorflow",
            "TF_CPP_MIN_LOG_LEVEL": "3",
            "TF_CONFIG": json.dumps(tf_config),
            "TMPDIR": str(folder / "tmp"),
        }
        command = [
            *train_command(tmp_path, "--strategy", "multi_worker", *extra),
            "--tfds-dir",
            str(folder / "tfds"),
        ]
        command[1:2] = ["-c", WORKER, str(folder / "state.npz")]
        processes.append(
            subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=open(folder / "stderr.txt", "w"),
            )
        )
    return processes


def wait_all(tmp_path, processes, timeout=1200):
    try:
        for process in processes:
            process.wait(timeout=timeout)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    return [
        (p.returncode, (tmp_path / f"worker{i}" / "stderr.txt").read_text())
        for i, p in enumerate(processes)
    ]


def final_state(tmp_path, index):
    with np.load(tmp_path / f"worker{index}" / "state.npz", allow_pickle=True) as f:
        return list(f["weights"]), int(f["iterations"])


def assert_same_weights(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def backup_iterations(run_dir):
    """The optimizer's step count in the backup that a rerun restores."""
    with h5py.File(run_dir / "backup" / "latest.weights.h5", "r") as f:
        return int(f["optimizer"]["vars"]["0"][()])


def test_a_lost_worker_stops_the_cluster_and_the_rerun_resumes_as_one(tmp_path):
    write_org_data(tmp_path / "data", sizes=(96, 8, 8))
    # Two validations of 26 steps (two passes of 13) each: the kill lands in
    # the second, long before its end; a backup every 2 steps.
    steps = 26
    common = [
        *("--validate-every", "160", "--train-examples", "320"),
        *("--checkpoint-every", "2", "--skip-eval"),
        # No decoding at each validation: only what a kill and a resume need.
        *("--validation-rouge-examples", "0"),
    ]
    processes = start_cluster(tmp_path, *common)
    metadata = tmp_path / "run" / "backup" / "training_metadata.json"
    deadline = time.monotonic() + 900
    while (
        time.monotonic() < deadline
        and all(p.poll() is None for p in processes)
        # 0 too while Keras rewrites the metadata, which it does in place.
        and backed_up_state(tmp_path / "run")[0] < 1
    ):
        time.sleep(0.5)
    assert all(p.poll() is None for p in processes), "a worker exited early"
    assert metadata.exists(), "no backup after 15 minutes"
    processes[1].send_signal(signal.SIGKILL)
    killed = time.monotonic()
    (code, err), _ = wait_all(tmp_path, processes, timeout=240)
    print(f"the chief exited {time.monotonic() - killed:.0f} s after the kill")
    assert code == 2, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("train.py: error")]
    assert len(errors) == 1 and "worker" in errors[0], err[-3000:]
    assert "Traceback" not in err

    # The other worker had started afresh, in a scratch folder of its own,
    # and made the chief's vocabulary from its own copy of the data.
    first_err = (tmp_path / "worker1" / "stderr.txt").read_text()
    scratch = Path(re.search(r"Starting run (\S+):", first_err).group(1))
    assert scratch.is_relative_to(tmp_path / "worker1" / "tmp")
    vocabulary = (tmp_path / "run" / "vocab.txt").read_text()
    assert (scratch / "vocab.txt").read_text() == vocabulary

    # The same command again, on both: training resumes from the backup,
    # taken within the second interval, which starts over from it.
    saved = json.loads(metadata.read_text())["epoch"]
    assert saved == 1
    schedule = json.loads((tmp_path / "run" / "schedule.json").read_text())
    assert (schedule["interval_batches"], schedule["max_validations"]) == (steps, 2)
    restored = backup_iterations(tmp_path / "run")
    assert restored >= steps
    processes = start_cluster(tmp_path, *common)
    (chief_code, chief_err), (code, err) = wait_all(tmp_path, processes)
    assert chief_code == 0, chief_err[-3000:]
    assert code == 0, err[-3000:]
    assert "Resuming run" in chief_err and "Resuming run" in err
    assert "on 2 replicas" in chief_err and "on 2 replicas" in err
    chief_weights, chief_steps = final_state(tmp_path, 0)
    weights, worker_steps = final_state(tmp_path, 1)
    # One interval run on top of the restored step count, on both workers,
    # which end with the same weights.
    assert chief_steps == worker_steps == restored + steps
    assert_same_weights(chief_weights, weights)
    # The chief's export holds the weights that the other worker ended with.
    exported = keras.saving.load_model(
        tmp_path / "export" / "1" / "model.keras", compile=False
    )
    assert isinstance(exported, HeadlineSummarizer)
    assert_same_weights([v.numpy() for v in exported.weights], weights)

    # The chief alone writes the run folder and the export...
    assert sorted(p.name for p in (tmp_path / "export").iterdir()) == ["1"]
    assert (tmp_path / "export" / "1" / "saved_model.pb").exists()
    run = tmp_path / "run"
    for name in ("config.json", "vocab.txt", "best.weights.h5", "model.keras"):
        assert (run / name).exists(), name
    assert json.loads(metadata.read_text())["epoch"] == saved + 1
    # ...the other one wrote its own to a scratch folder, since removed.
    scratch = Path(re.search(r"Resuming run (\S+):", err).group(1))
    assert scratch.is_relative_to(tmp_path / "worker1" / "tmp")
    assert not scratch.exists() and not scratch.parent.exists()
