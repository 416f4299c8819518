"""The members' training on JAX over several devices and processes
(`models.training.devices`): two training steps of a tiny summarizer, with
dropout and the sampled softmax, on the same global batches of 8, give the
one-device run's losses and weights to float32 tolerance, on two local CPU
devices (`--xla_force_host_platform_device_count=2`) and on two processes
joined on loopback by `jax.distributed.initialize` (gloo's CPU
collectives), each reading its own 4 rows of every batch.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from models.data.arrays import write_arrays

pytestmark = [pytest.mark.jax_only, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
STEP = Path(__file__).resolve().parent / "data_parallel_step.py"


def _examples(count=24, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        source = rng.integers(4, 30, int(rng.integers(2, 17))).astype(np.int32)
        target = rng.integers(4, 30, int(rng.integers(3, 8))).astype(np.int32)
        inputs = {
            "source_ids": source,
            "source_ext_ids": source,
            "target_in": target[:-1],
        }
        yield inputs, target[1:]


def _env(devices=1):
    flags = os.environ.get("XLA_FLAGS", "")
    flags += f" --xla_force_host_platform_device_count={devices}"
    return {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "XLA_FLAGS": flags.strip(),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "JAX_DISABLE_MOST_OPTIMIZATIONS": "1",
    }


def _start(folder, out, *hosts, devices=1):
    return subprocess.Popen(
        [sys.executable, str(STEP), str(folder), str(out), *map(str, hosts)],
        env=_env(devices),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _done(process):
    out, _ = process.communicate(timeout=600)
    assert process.returncode == 0, out[-3000:]
    return out


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """`{run: (output, saved arrays)}` of the one-device run, two local
    devices and two processes."""
    tmp = tmp_path_factory.mktemp("data_parallel")
    folder = write_arrays(_examples(), tmp / "arrays")
    runs = {}
    one = _done(_start(folder, tmp / "one.npz"))
    runs["one"] = (one, np.load(tmp / "one.npz"))
    two = _done(_start(folder, tmp / "two.npz", devices=2))
    runs["two"] = (two, np.load(tmp / "two.npz"))
    address = f"127.0.0.1:{_free_port()}"
    second = _start(folder, tmp / "second.npz", address, 2, 1)
    first = _start(folder, tmp / "hosts.npz", address, 2, 0)
    outputs = [_done(first), _done(second)]
    runs["hosts"] = ("\n".join(outputs), np.load(tmp / "hosts.npz"))
    # Only process 0 keeps what it trained.
    assert not (tmp / "second.npz").exists()
    return runs


def _assert_same(one, other):
    assert one.files == other.files
    assert len(one.files) > 10, one.files
    losses = one["losses"]
    assert losses.shape == (2,) and np.all(np.isfinite(losses)), losses
    for name in one.files:
        np.testing.assert_allclose(other[name], one[name], rtol=1e-5, atol=1e-5)


def test_two_local_devices_train_as_one(steps):
    assert "devices 1 losses" in steps["one"][0]
    assert "devices 2 losses" in steps["two"][0]
    _assert_same(steps["one"][1], steps["two"][1])


def test_two_processes_on_loopback_train_as_one(steps):
    out, saved = steps["hosts"]
    assert out.count("devices 2 losses") == 2, out[-3000:]
    _assert_same(steps["one"][1], saved)


def test_a_batch_that_does_not_divide_over_the_devices_is_refused(tmp_path):
    code = (
        "from models.training import devices\n"
        "try:\n"
        "    devices.data_parallel(7)\n"
        "except ValueError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(devices=2),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == (
        "`--batch-size` must divide over the 2 devices (each takes an equal "
        "share of every batch). Received: batch_size=7"
    )
