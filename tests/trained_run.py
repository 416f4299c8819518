"""The one tiny trained run that every module's `trained` fixture shares."""

import fcntl
import json
import os
import subprocess

from e2e import train_tiny_run


def shared_trained_run(tmp_path_factory):
    """`(folder, result)` of one tiny `train.py` run (`e2e.train_tiny_run`).

    The run is in `folder / "run"` and its export in `folder / "export" / "1"`.
    Under pytest-xdist the workers share one run: the first to need it
    trains while holding a file lock, the others wait and read what it
    wrote (the finished process's fields, saved as JSON beside the run).

    Args:
        tmp_path_factory: pytest's session `tmp_path_factory`.

    Returns:
        `(folder, result)`: the run's folder and its finished
        `subprocess.CompletedProcess`.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        tmp_path = tmp_path_factory.mktemp("e2e")
        return tmp_path, train_tiny_run(tmp_path)
    shared = tmp_path_factory.getbasetemp().parent  # one per test session
    folder, saved = shared / "e2e-trained", shared / "e2e-trained.json"
    with open(shared / "e2e-trained.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not saved.exists():
            folder.mkdir()
            result = train_tiny_run(folder)
            fields = ("args", "returncode", "stdout", "stderr")
            saved.write_text(json.dumps({f: getattr(result, f) for f in fields}))
    return folder, subprocess.CompletedProcess(**json.loads(saved.read_text()))
