"""`python -m models.export` killed for real, and its decoding flags end to end.

Kill trials: each is a real `kill -9` (SIGKILL) of a real `python -m
models.export` process, at a random moment of its life. A trial costs a
process start (TensorFlow, the model, the signatures' tracing), so the kill
moments are drawn over the life of one export (measured first, without a
kill), and the trials run two at a time, which also has two exports race
for the next version number; some finish before their kill. Afterwards
every version folder is complete (the same files as the full export) or
absent, the server's manager loads the newest, and the age rule removes the
kills' temporary folders. The full export is a finished run exported again:
the next version, decoding as the first.
"""

import pytest

pytestmark = [pytest.mark.tf_only, pytest.mark.slow]

import os  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

import httpx  # noqa: E402
from servers import ROOT, Server  # noqa: E402

from models.settings.version_folders import (  # noqa: E402
    TMP_PREFIX,
    remove_stale_temporaries,
    version_dirs,  # noqa: E402
)
from serving.servable import ModelManager  # noqa: E402

# At least 20 kills at random moments (fewer with `KILL_TRIALS` while
# working on this file).
KILL_TRIALS = int(os.environ.get("KILL_TRIALS", "20"))


def _export_command(run_dir, export_dir, *flags):
    return [
        sys.executable,
        "-m",
        "models.export",
        "--run-dir",
        str(run_dir),
        "--export-dir",
        str(export_dir),
        *flags,
    ]


def _env():
    return {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}


def _files(folder):
    """Relative path -> size of every file under `folder`."""
    return {
        str(p.relative_to(folder)): p.stat().st_size
        for p in folder.rglob("*")
        if p.is_file()
    }


def _export_killed_at(run_dir, export_dir, delay_s):
    """Starts an export and SIGKILLs it after `delay_s`; returns its exit code."""
    process = subprocess.Popen(
        _export_command(run_dir, export_dir),
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        return process.wait(timeout=delay_s)  # Finished before its kill.
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        return process.wait()


def _assert_exported_again(first, again):
    """`again`, exported from a finished run, decodes as `first` (train.py's)."""
    import json

    import tensorflow as tf

    # The run's tuned decoding settings, as in the first export.
    assert json.loads((again / "search_options.json").read_text()) == json.loads(
        (first / "search_options.json").read_text()
    )
    docs = tf.constant(["w1 w2 w3 w4 corp. said", "w5 w6 w7 w8 w9"])
    models = [tf.saved_model.load(str(v)) for v in (first, again)]
    for signature in ("greedy", "serving_default"):
        first_out, again_out = (m.signatures[signature](documents=docs) for m in models)
        assert first_out["headlines"].numpy().tolist() == (
            again_out["headlines"].numpy().tolist()
        )


def test_kill_9_at_random_moments_leaves_whole_versions(trained, tmp_path):
    run_dir = trained[0] / "run"
    export_dir = tmp_path / "headlines"
    # The first export is train.py's. The full one, unkilled, is a finished
    # run exported again by the command line, in a fresh process (which must
    # register the model's classes itself): the next version.
    shutil.copytree(trained[0] / "export" / "1", export_dir / "1")
    start = time.monotonic()
    full = subprocess.run(
        _export_command(run_dir, export_dir),
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    full_s = time.monotonic() - start
    assert full.returncode == 0, full.stderr[-3000:]
    assert f"Exported {export_dir / '2'}" in full.stdout
    reference = _files(export_dir / "2")
    assert {"saved_model.pb", "search_options.json", "config.json"} <= set(reference)
    _assert_exported_again(export_dir / "1", export_dir / "2")

    rng = random.Random(os.getpid())
    # Within the full export's time: two at a time, each runs slower, so
    # most are killed and a few finish.
    delays = [rng.uniform(0.0, full_s) for _ in range(KILL_TRIALS)]
    with ThreadPoolExecutor(2) as pool:
        codes = list(
            pool.map(lambda d: _export_killed_at(run_dir, export_dir, d), delays)
        )
    killed = codes.count(-signal.SIGKILL)
    assert killed >= KILL_TRIALS // 2, (codes, delays, full_s)

    versions = version_dirs(export_dir)
    integer_names = sorted(
        int(p.name) for p in export_dir.iterdir() if p.name.isdigit()
    )
    # Complete or absent: no integer-named folder without its SavedModel...
    assert [v for v, _ in versions] == integer_names
    # ...and every one the command line wrote (not train.py's first, which
    # its evaluation added to) holds exactly the full export's files.
    for _, folder in versions[1:]:
        assert set(_files(folder)) == set(reference), folder
        variables = {k: v for k, v in _files(folder).items() if "variables" in k}
        assert variables == {k: v for k, v in reference.items() if "variables" in k}
    # Exports that finished (code 0) are each one version; a kill after the
    # rename that publishes a version, before the process exits, leaves one too.
    assert 2 + codes.count(0) <= len(versions) <= 2 + len(codes)

    manager = ModelManager(export_dir, poll_seconds=0)
    assert manager.current.version == versions[-1][0]

    # The kills leave temporaries; the age rule removes them once stale,
    # and never a fresh one (an export that may still be running).
    temporaries = sorted(export_dir.glob(TMP_PREFIX + "*"))
    assert remove_stale_temporaries(export_dir) == []
    assert sorted(export_dir.glob(TMP_PREFIX + "*")) == temporaries
    old = time.time() - 2 * 3600
    for folder in temporaries:
        os.utime(folder, (old, old))
    assert sorted(remove_stale_temporaries(export_dir)) == temporaries
    assert list(export_dir.glob(TMP_PREFIX + "*")) == []
    assert version_dirs(export_dir) == versions


def test_decoding_flags_end_to_end(trained, tmp_path):
    """`--xla --shards 2 --shortlist 20 --n-best 2`: written with those
    options, loaded and served by a fresh server process; its default
    signature answers what `length_control` answers with the export's
    settings, and its `n_best` lists begin with the default's headline."""
    import json

    run_dir = trained[0] / "run"
    export_dir = tmp_path / "headlines"
    flags = ["--xla", "--shards", "2", "--shortlist", "20", "--n-best", "2"]
    result = subprocess.run(
        _export_command(run_dir, export_dir, *flags),
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Exported {export_dir / '1'}" in result.stdout
    options = json.loads((export_dir / "1" / "search_options.json").read_text())
    assert (options["xla"], options["shards"], options["shortlist"]) == (True, 2, 20)
    assert options["n_best"] == 2

    # The server calls every signature once before it answers (XLA compiles).
    # Each new shape compiles on its first call: no request timeout.
    server = Server(
        export_dir,
        tmp_path / "server.log",
        "--poll-seconds",
        "0",
        "--request-timeout-s",
        "600",
    )
    docs = ["w1 w2 w3 w4 .", "w5 w6 w7", "w8 w9 w1 w2 w3 w4 w5"]
    # One document per request, one request at a time: each call has the
    # warm-up's shape (one row, 16 source words), which the server compiled
    # before it answered, so no request waits for XLA.
    try:
        server.wait_ready(timeout_s=600)
        answers = [
            [
                httpx.post(
                    server.url + "/v1/models/headlines:predict",
                    json={"instances": [doc], **lengths},
                    timeout=300,
                )
                for doc in docs
            ]
            for lengths in (
                {},
                {"max_length": options["max_length"]},
                {"signature_name": "n_best"},
            )
        ]
    finally:
        server.stop()
    codes = [[a.status_code for a in group] for group in answers]
    assert codes == [[200] * 3] * 3, answers[0][0].text
    default, controlled, n_best = (
        [a.json()["predictions"][0]["headlines"] for a in group] for group in answers
    )
    assert len(default) == 3
    assert default == controlled
    # The n-best search runs without XLA: the same model, the same beams.
    assert [len(hypotheses) for hypotheses in n_best] == [2, 2, 2]
    assert [hypotheses[0] for hypotheses in n_best] == default
    scores = [a.json()["predictions"][0]["scores"] for a in answers[2]]
    assert all(first >= second for first, second in scores), scores
