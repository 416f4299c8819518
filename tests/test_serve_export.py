"""`python -m serving` on a real export: the `trained` fixture's.

The server runs as the README starts it, in its own process, and its answers
must be what the SavedModel itself gives.
"""

import pytest

pytestmark = [pytest.mark.tf_only, pytest.mark.slow]

import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import httpx  # noqa: E402  (plain: a missing dependency fails, never skips)
import numpy as np  # noqa: E402
from e2e import ROOT  # noqa: E402

DOCS = ["w1 w2 w3 w4 corp. said", "Japan's NEC Corp. said it would cut 2,500 jobs."]


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Session scope: built once per worker process, whatever order the worker
# runs the tests in.
@pytest.fixture(scope="session")
def server(trained):
    tmp_path, _ = trained
    port = _free_port()
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [
        sys.executable,
        "-m",
        "serving",
        "--model-dir",
        str(tmp_path / "export"),
        "--port",
        str(port),
        "--poll-seconds",
        "0",
    ]
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}/v1/models/headlines"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, process.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the server did not start in 180 s"
            try:
                if httpx.get(url, timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="session")
def direct(trained):
    """What the SavedModel answers when loaded without the server."""
    import tensorflow as tf

    tmp_path, _ = trained
    version = tmp_path / "export" / "1"
    model = tf.saved_model.load(str(version))
    out = {
        name: model.signatures[name](documents=tf.constant(DOCS))
        for name in ("serving_default", "attention")
    }
    # What a request with `"max_length": 2` must get: the other settings are
    # search_options.json's.
    defaults = json.loads((version / "search_options.json").read_text())
    out["max_length=2"] = model.signatures["length_control"](
        documents=tf.constant(DOCS),
        min_length=tf.constant(defaults["min_length"]),
        max_length=tf.constant(2),
        length_penalty=tf.constant(float(defaults["length_penalty"])),
    )
    return out


def test_status_lists_the_exported_version(server):
    status = httpx.get(server, timeout=30).json()
    [version] = status["model_version_status"]
    assert (version["version"], version["state"]) == ("1", "AVAILABLE")


def test_predict_answers_what_the_saved_model_answers(server, direct):
    response = httpx.post(f"{server}:predict", json={"instances": DOCS}, timeout=120)
    assert response.status_code == 200, response.text
    predictions = response.json()["predictions"]
    want = direct["serving_default"]
    assert [p["headlines"] for p in predictions] == [
        h.decode("utf-8") for h in want["headlines"].numpy()
    ]
    assert [p["scores"] for p in predictions] == pytest.approx(
        want["scores"].numpy().tolist(), rel=1e-5
    )


def test_attention_signature_over_rest(server, direct):
    body = {"signature_name": "attention", "inputs": {"documents": DOCS}}
    response = httpx.post(f"{server}:predict", json=body, timeout=120)
    assert response.status_code == 200, response.text
    outputs = response.json()["outputs"]
    want = direct["attention"]
    assert outputs["headlines"] == [h.decode() for h in want["headlines"].numpy()]
    # The server cuts the batch's padding columns; the rest is the model's.
    s, t = len(outputs["source_tokens"][0]), len(outputs["headline_tokens"][0])
    source = want["source_tokens"].numpy().astype(str)
    assert outputs["source_tokens"] == source[:, :s].tolist()
    assert (source[:, s:] == "").all()
    np.testing.assert_allclose(
        outputs["attention"], want["attention"].numpy()[:, :t, :s], rtol=1e-5
    )
    assert t >= 1 and s == (source != "").sum(axis=1).max()


def test_length_fields_over_rest(server, direct):
    body = {"instances": DOCS, "max_length": 2}
    response = httpx.post(f"{server}:predict", json=body, timeout=120)
    assert response.status_code == 200, response.text
    predictions = response.json()["predictions"]
    want = direct["max_length=2"]
    assert [p["headlines"] for p in predictions] == [
        h.decode("utf-8") for h in want["headlines"].numpy()
    ]
    assert [p["scores"] for p in predictions] == pytest.approx(
        want["scores"].numpy().tolist(), rel=1e-5
    )
    assert all(len(p["normalized_headlines"].split()) <= 2 for p in predictions)
    assert set(predictions[0]) == {"headlines", "normalized_headlines", "scores"}

    bad = httpx.post(
        f"{server}:predict",
        json={"instances": DOCS, "min_length": 3, "max_length": 2},
        timeout=120,
    )
    assert bad.status_code == 400
    assert bad.json() == {
        "error": "`min_length` must be at most `max_length`. "
        "Received: min_length=3, max_length=2"
    }


def test_a_model_that_loses_to_the_lead_baseline_says_so(trained, server):
    # The tiny data's headline is its document's first 3 words, and the lead
    # baseline's N is the headlines' median, 3: the baseline is the
    # reference itself, which the barely trained model cannot beat.
    tmp_path, result = trained
    version = tmp_path / "export" / "1"
    lengths = json.loads((version / "lengths.json").read_text())
    assert lengths["lead_tokens"] == 3
    assert lengths["chosen"]["max_source_length"] == "given"
    check = json.loads((version / "training.json").read_text())["validation_check"]
    assert check["baseline"] == "lead_3" and check["examples"] == 8
    assert check["lead_baseline"] == {"rouge1": 100.0, "rouge2": 100.0, "rougeL": 100.0}
    assert check["beats_lead_baseline"] is False
    metrics = json.loads((version / "metrics.json").read_text())
    assert metrics["training"]["validation_check"] == check
    # The command's last lines say so, and what to try.
    last = result.stderr.strip().splitlines()[-2:]
    assert last[0].startswith("[train.py] NOT TRAINED ENOUGH: the model does not beat")
    assert "100.00 / 100.00 / 100.00" in last[0]
    assert last[1].startswith("[train.py] to try: more data")
    # The server's metadata, beside the signatures.
    meta = httpx.get(f"{server}/metadata", timeout=30).json()["metadata"]
    assert meta["validation_check"] == check
    assert "serving_default" in meta["signature_def"]["signature_def"]
