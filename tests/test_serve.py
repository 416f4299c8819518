"""Tests of `serving` against a fake SavedModel with the export's
signatures (`fake_servable.py`): every answer can be checked exactly. The web
page and the load generator are tried in test_serve_page.py.
"""

import pytest

pytestmark = pytest.mark.tf_only

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# Plain imports: a missing dependency fails the run, never skips it.
import httpx  # noqa: E402
import starlette  # noqa: E402, F401
from fake_servable import (  # noqa: E402
    DOC,
    TestClient,
    headlines_folder,
    save_fake,
    serve_in_thread,
    server_config,
)

import serving as serve  # noqa: E402

# ----------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def fake_models(tmp_path_factory):
    """`(version 1 folder, version 2 folder)` saved once for the whole module."""
    root = tmp_path_factory.mktemp("fake")
    v1, v2 = root / "v1", root / "v2"
    save_fake(v1, upper=True)
    save_fake(v2, upper=False)
    return v1, v2


@pytest.fixture
def model_dir(tmp_path, fake_models):
    return headlines_folder(tmp_path, fake_models[0])


@pytest.fixture(scope="module")
def strict_client(tmp_path_factory, fake_models):
    """One server with small limits shared by the bad-input cases."""
    target = headlines_folder(tmp_path_factory.mktemp("strict"), fake_models[0])
    app = serve.create_app(server_config(target, max_instances=4, max_body_bytes=1000))
    with TestClient(app) as c:
        yield c


@pytest.fixture
def client(model_dir):
    with TestClient(serve.create_app(server_config(model_dir))) as c:
        yield c


# ------------------------------------------------------------------- isolation


def test_server_imports_no_model_code():
    # A fresh interpreter (this one has imported everything). TensorFlow itself
    # loads parts of keras, so what counts is what `serving` adds to it.
    probe = (
        "import sys, tensorflow, starlette.applications, starlette.staticfiles\n"
        "before = set(sys.modules)\n"
        "import serving\n"
        "serving.create_app\n"
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[1],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    added = set(result.stdout.split())
    assert {"serving.app", "serving.codec"} <= added
    model_code = {m for m in added if m.startswith(("keras", "models."))}
    # The packages `models.settings` and `models.decoding` import nothing
    # themselves.
    allowed = {
        "models.settings",
        "models.decoding",
        "models.settings.errors",
        "models.settings.flags",
        "models.settings.folder_layout",
        "models.decoding.saved_model_client",
        "models.settings.startup",
        "models.settings.version_folders",
    }
    assert {m for m in model_code if not m.startswith("serving")} <= allowed


# ---------------------------------------------------------------------- REST API


def test_status_and_metadata(client):
    expected = {
        "model_version_status": [
            {
                "version": "1",
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
        ]
    }
    assert client.get("/v1/models/headlines").json() == expected
    assert client.get("/v1/models/headlines/versions/1").json() == expected

    meta = client.get("/v1/models/headlines/metadata").json()
    assert meta["model_spec"] == {
        "name": "headlines",
        "signature_name": "",
        "version": "1",
    }
    sigs = meta["metadata"]["signature_def"]["signature_def"]
    assert set(sigs) == {"serving_default", "greedy", "attention", "length_control"}
    assert sigs["length_control"]["inputs"]["max_length"]["tensor_shape"] == {
        "dim": [],
        "unknown_rank": False,
    }
    doc_in = sigs["serving_default"]["inputs"]["documents"]
    assert doc_in["dtype"] == "DT_STRING"
    assert doc_in["tensor_shape"]["dim"][0]["size"] == "-1"
    assert sigs["serving_default"]["method_name"] == "tensorflow/serving/predict"
    assert set(sigs["attention"]["outputs"]) == {
        "headlines",
        "scores",
        "source_tokens",
        "headline_tokens",
        "source_words",
        "headline_words",
        "attention",
    }
    assert sigs["attention"]["outputs"]["attention"]["dtype"] == "DT_FLOAT"
    assert len(sigs["attention"]["outputs"]["attention"]["tensor_shape"]["dim"]) == 3
    assert client.get("/v1/models/headlines/versions/1/metadata").status_code == 200


def test_the_exports_validation_check_is_shown(model_dir):
    check = {"baseline": "lead_8", "beats_lead_baseline": False}
    (model_dir / "1" / "training.json").write_text(
        json.dumps({"validation_check": check})
    )
    with TestClient(serve.create_app(server_config(model_dir))) as c:
        meta = c.get("/v1/models/headlines/metadata").json()["metadata"]
        page = c.post("/api/headline", json={"document": "a b c d"}).json()
    assert meta["validation_check"] == check
    assert page["validation_check"] == check


def test_predict_row_and_columnar(client):
    url = "/v1/models/headlines:predict"
    docs = [DOC, "one two"]
    want = [
        {"headlines": "ALPHA BETA GAMMA", "scores": -5.0},
        {"headlines": "ONE TWO", "scores": -2.0},
    ]
    row = client.post(url, json={"instances": docs})
    assert row.status_code == 200, row.text
    assert row.json() == {"predictions": want}

    objects = client.post(
        "/v1/models/headlines/versions/1:predict",
        json={
            "signature_name": "serving_default",
            "instances": [{"documents": d} for d in docs],
        },
    )
    assert objects.json() == {"predictions": want}

    b64 = client.post(url, json={"instances": [{"b64": "aMOpbGxvIHfDtnJsZA=="}]})
    assert (
        b64.json()["predictions"][0]["headlines"] == "HéLLO WöRLD"
    )  # ASCII-only upper()

    expected_cols = {"headlines": [w["headlines"] for w in want], "scores": [-5, -2]}
    for inputs in (docs, {"documents": docs}):
        cols = client.post(url, json={"inputs": inputs})
        assert cols.status_code == 200, cols.text
        assert cols.json() == {"outputs": expected_cols}


def test_attention_signature_and_page_api(client):
    resp = client.post(
        "/v1/models/headlines:predict",
        json={"signature_name": "attention", "instances": ["a b c d", "x y"]},
    )
    assert resp.status_code == 200, resp.text
    first, second = resp.json()["predictions"]
    assert first["source_tokens"] == ["a", "b", "c", "d"]
    assert first["headline_tokens"] == ["A", "B", "C"]
    assert first["attention"][1] == [0.0, 1.0, 0.0, 0.0]
    # Rows of one request share its padding ("" tokens, zero attention rows).
    assert second["source_tokens"] == ["x", "y", "", ""]
    assert second["source_words"] == ["X", "Y", "", ""]
    assert second["attention"][2] == [0.0, 0.0, 0.0, 0.0]

    page = client.post("/api/headline", json={"document": DOC})
    assert page.status_code == 200, page.text
    body = page.json()
    assert body["headline"] == "ALPHA BETA GAMMA"
    assert body["model_version"] == "1"
    assert body["source_tokens"] == DOC.split()
    # The page labels its heatmap with the words, cut to the tokens' padding.
    assert body["source_words"] == DOC.upper().split()
    assert body["headline_words"] == ["alpha", "beta", "gamma"]
    assert len(body["attention"]) == 3 and len(body["attention"][0]) == 5

    index = client.get("/")
    assert index.status_code == 200 and "Headline generator" in index.text
    assert "default-src 'self'" in index.headers["content-security-policy"]
    assert client.get("/static/app.js").status_code == 200


@pytest.mark.parametrize(
    "path, body, status, fragment",
    [
        ("/v1/models/headlines:predict", b"{not json", 400, "must be valid JSON"),
        ("/v1/models/headlines:predict", b"", 400, "an empty body"),
        ("/v1/models/headlines:predict", b"\xff\xfe", 400, "UTF-8"),
        ("/v1/models/headlines:predict", [DOC], 400, "Received: list"),
        ("/v1/models/headlines:predict", {"instance": [DOC]}, 400, "unknown field"),
        ("/v1/models/headlines:predict", {}, 400, "Missing 'inputs' or 'instances'"),
        (
            "/v1/models/headlines:predict",
            {"instances": [DOC], "inputs": [DOC]},
            400,
            "not both",
        ),
        ("/v1/models/headlines:predict", {"instances": []}, 400, "empty list"),
        ("/v1/models/headlines:predict", {"instances": DOC}, 400, "must be a list"),
        ("/v1/models/headlines:predict", {"instances": [DOC, 5]}, 400, "instances[1]"),
        (
            "/v1/models/headlines:predict",
            {"instances": [{"document": DOC}]},
            400,
            "unknown: ['document']",
        ),
        (
            "/v1/models/headlines:predict",
            {"instances": [{"documents": ["nested"]}]},
            400,
            "must be a string or",
        ),
        (
            "/v1/models/headlines:predict",
            {"instances": [{"b64": "***"}]},
            400,
            "base64",
        ),
        ("/v1/models/headlines:predict", {"inputs": {"documents": []}}, 400, "empty"),
        ("/v1/models/headlines:predict", {"inputs": {"docs": [DOC]}}, 400, "unknown"),
        ("/v1/models/headlines:predict", {"inputs": DOC}, 400, "must be a list"),
        (
            "/v1/models/headlines:predict",
            {"signature_name": "nope", "instances": [DOC]},
            400,
            'signature name: "nope" not found',
        ),
        (
            "/v1/models/headlines:predict",
            {"signature_name": 3, "instances": [DOC]},
            400,
            "must be a string",
        ),
        (
            "/v1/models/headlines:predict",
            {"instances": [DOC] * 5},
            400,
            "Received: 5 instances",
        ),
        (
            "/v1/models/headlines:predict",
            {"instances": ["x" * 2000]},
            413,
            "exceeds the limit",
        ),
        ("/v1/models/other:predict", {"instances": [DOC]}, 404, "Latest(other)"),
        (
            "/v1/models/headlines/versions/7:predict",
            {"instances": [DOC]},
            404,
            "Specific(headlines, 7)",
        ),
        ("/v1/models/headlines:classify", {"examples": []}, 400, "not supported"),
        ("/v1/models/headlines:frobnicate", {"instances": [DOC]}, 404, "Unknown"),
        ("/api/headline", {"document": ""}, 400, "non-empty string"),
        ("/api/headline", {"doc": DOC}, 400, '{"document": "..."}'),
    ],
)
def test_bad_input_is_a_4xx_json_error(strict_client, path, body, status, fragment):
    if isinstance(body, bytes):
        resp = strict_client.post(path, content=body)
    else:
        resp = strict_client.post(path, json=body)
    assert resp.status_code == status, resp.text
    assert fragment in resp.json()["error"]
    # The server keeps serving after a bad request.
    ok = strict_client.post("/v1/models/headlines:predict", json={"instances": [DOC]})
    assert ok.status_code == 200


def test_get_errors(client):
    assert client.get("/v1/models/other").status_code == 404
    assert client.get("/v1/models/headlines/versions/3").status_code == 404
    assert client.get("/v1/models/headlines/labels/stable").status_code == 404
    assert client.get("/v1/models/headlines:predict").status_code == 405
    assert "error" in client.get("/v1/models/headlines:predict").json()


def test_full_queue_is_503_and_slow_request_is_504(model_dir):
    # Without the lifespan the batch worker never starts, so jobs stay queued.
    app = serve.create_app(server_config(model_dir, max_queue=1, request_timeout_s=0.2))
    client = TestClient(app)
    url = "/v1/models/headlines:predict"
    timed_out = client.post(url, json={"instances": [DOC]})
    assert timed_out.status_code == 504
    assert "timed out after 0.2 s" in timed_out.json()["error"]
    full = client.post(url, json={"instances": [DOC]})  # Queue still holds job 1.
    assert full.status_code == 503
    assert "overloaded" in full.json()["error"]
    client.close()


def test_missing_model_dir_fails_fast(tmp_path):
    with pytest.raises(FileNotFoundError, match="No version folder"):
        serve.create_app(server_config(tmp_path / "nothing"))
    with pytest.raises(SystemExit, match="No version folder"):
        serve.main(["--model-dir", str(tmp_path / "nothing")])


# ------------------------------------------------------- batching and hot swapping


def test_concurrent_requests_are_batched(model_dir):
    app = serve.create_app(server_config(model_dir, batch_timeout_ms=50))

    async def fire(base):
        async with httpx.AsyncClient(base_url=base, timeout=20) as http:

            async def one(i):
                words = " ".join(f"w{i}x{j}" for j in range(1 + i % 4))
                sig = "attention" if i % 2 else "serving_default"
                resp = await http.post(
                    "/v1/models/headlines:predict",
                    json={"signature_name": sig, "instances": [words]},
                )
                return i, words, sig, resp

            results = await asyncio.gather(*(one(i) for i in range(24)))
            stats = (await http.get("/monitoring/stats")).json()
            return results, stats

    with serve_in_thread(app) as base:
        results, stats = asyncio.run(fire(base))
    for _, words, sig, resp in results:
        assert resp.status_code == 200, resp.text
        pred = resp.json()["predictions"][0]
        assert pred["headlines"] == " ".join(words.split()[:3]).upper()
        if sig == "attention":
            # Batch-mates' padding is trimmed away: exactly this document's words.
            assert pred["source_tokens"] == words.split()
    sizes = [int(r.headers["x-batch-size"]) for *_, r in results]
    assert max(sizes) > 1
    assert stats["multi_request_batches"] >= 1
    assert stats["max_batch_size_seen"] > 1
    assert stats["jobs"] == 24 and stats["batches"] < 24


def test_new_version_is_picked_up_without_dropping_requests(model_dir, fake_models):
    app = serve.create_app(server_config(model_dir, poll_seconds=0.2))
    seen, failures, stop = [], [], threading.Event()

    def hammer(base):
        with httpx.Client(base_url=base, timeout=20) as http:
            while not stop.is_set():
                resp = http.post(
                    "/v1/models/headlines:predict", json={"instances": [DOC]}
                )
                if resp.status_code != 200:
                    failures.append(resp.text)
                else:
                    seen.append(resp.json()["predictions"][0]["headlines"])

    with serve_in_thread(app) as base:
        workers = [threading.Thread(target=hammer, args=(base,)) for _ in range(3)]
        for w in workers:
            w.start()
        time.sleep(0.5)
        shutil.copytree(fake_models[1], model_dir / ".incoming-2")
        os.rename(model_dir / ".incoming-2", model_dir / "2")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "alpha beta gamma" not in seen[-3:]:
            time.sleep(0.1)
        time.sleep(0.3)
        stop.set()
        for w in workers:
            w.join(timeout=20)
        status = httpx.get(f"{base}/v1/models/headlines").json()

    assert not failures
    assert seen[0] == "ALPHA BETA GAMMA"
    assert seen[-1] == "alpha beta gamma"
    switch = seen.index("alpha beta gamma")
    assert all(h == "alpha beta gamma" for h in seen[switch + 3 :])  # 3 in flight
    assert status["model_version_status"][0]["version"] == "2"


def test_monitoring_stats_shape(client):
    client.post("/v1/models/headlines:predict", json={"instances": [DOC, DOC]})
    stats = client.get("/monitoring/stats").json()
    assert stats["model_version"] == "1"
    assert stats["instances"] == 2 and stats["batches"] == 1
    # Plain JSON numbers (no NaN, which `json` would write as a bare token).
    json.loads(json.dumps(stats, allow_nan=False))
