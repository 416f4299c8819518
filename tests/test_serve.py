"""Tests of `models.serve` against a fake SavedModel with the export's signatures.

The signatures are those `models/inference/module.py` defines (see its docstring; a
real export is served in test_serve_export.py). The fake `headlines` model
writes the first three words of a document (upper-cased in version 1,
lower-cased in version 2) and attends from headline word `t` to source word
`t`, so every answer can be checked exactly.
"""

import pytest

pytestmark = pytest.mark.tf_only

import asyncio  # noqa: E402
import contextlib  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# Plain imports: a missing dependency fails the run, never skips it.
import httpx  # noqa: E402
import starlette  # noqa: E402, F401
import tensorflow as tf  # noqa: E402
import uvicorn  # noqa: E402

with warnings.catch_warnings():  # Starlette nags about httpx vs httpx2.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient  # noqa: E402

from models import serve  # noqa: E402

# Debian's `chromium`, Ubuntu's `chromium-browser`, or any in $CHROMIUM.
CHROMIUM = (
    os.environ.get("CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
)
DOC = "Alpha Beta Gamma delta epsilon"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


# ----------------------------------------------------------------- fake SavedModel


_DOCS_SPEC = tf.TensorSpec([None], tf.string, name="documents")
# The fake's `search_options.json`: `length_control` with these values
# answers what `serving_default` answers.
FAKE_OPTIONS = {"min_length": 0, "max_length": 3, "length_penalty": 1.0}


class _FakeHeadlines(tf.Module):
    def __init__(self, upper: bool):
        super().__init__()
        self._upper = upper

    def _outputs(self, documents, words=3, length_penalty=1.0):
        """The first `words` words; scores `-length_penalty * source words`."""
        words_of = tf.strings.split(documents)
        change = tf.strings.upper if self._upper else tf.strings.lower
        first = tf.ragged.map_flat_values(change, words_of[:, :words])
        source = words_of.to_tensor("")
        headline = first.to_tensor("")
        eye = tf.eye(tf.shape(headline)[1], tf.shape(source)[1])
        valid = tf.cast(headline != "", tf.float32)[:, :, None]
        return {
            "headlines": tf.strings.reduce_join(first, axis=1, separator=" "),
            "scores": -length_penalty * tf.cast(words_of.row_lengths(), tf.float32),
            "source_tokens": source,
            "headline_tokens": headline,
            # Stand-ins for the words as the reader sees them.
            "source_words": tf.strings.upper(source),
            "headline_words": tf.strings.lower(headline),
            "attention": eye[None] * valid,
        }

    @tf.function(input_signature=[_DOCS_SPEC])
    def serve(self, documents):
        out = self._outputs(documents)
        return {k: out[k] for k in ("headlines", "scores")}

    @tf.function(input_signature=[_DOCS_SPEC])
    def attention(self, documents):
        return self._outputs(documents)

    @tf.function(
        input_signature=[
            _DOCS_SPEC,
            tf.TensorSpec([], tf.int32, name="min_length"),
            tf.TensorSpec([], tf.int32, name="max_length"),
            tf.TensorSpec([], tf.float32, name="length_penalty"),
        ]
    )
    def length_control(self, documents, min_length, max_length, length_penalty):
        # Three words, or as many as the lengths demand.
        words = tf.minimum(tf.maximum(3, min_length), max_length)
        return self._outputs(documents, words, length_penalty)


def _save_fake(path: Path, upper: bool) -> None:
    module = _FakeHeadlines(upper)
    tmp = path.parent / f".tmp-{path.name}"
    tf.saved_model.save(
        module,
        str(tmp),
        signatures={
            "serving_default": module.serve.get_concrete_function(),
            "greedy": module.serve.get_concrete_function(),
            "attention": module.attention.get_concrete_function(),
            "length_control": module.length_control.get_concrete_function(),
        },
    )
    (tmp / "search_options.json").write_text(json.dumps(FAKE_OPTIONS))
    os.rename(tmp, path)  # Atomic, as the real exporter does.


@pytest.fixture(scope="module")
def fake_models(tmp_path_factory):
    """`(version 1 folder, version 2 folder)` saved once for the whole module."""
    root = tmp_path_factory.mktemp("fake")
    v1, v2 = root / "v1", root / "v2"
    _save_fake(v1, upper=True)
    _save_fake(v2, upper=False)
    return v1, v2


@pytest.fixture
def model_dir(tmp_path, fake_models):
    target = tmp_path / "headlines"
    target.mkdir()
    shutil.copytree(fake_models[0], target / "1")
    return target


def _config(model_dir, **overrides):
    settings = dict(model_dir=str(model_dir), poll_seconds=0, batch_timeout_ms=2)
    settings.update(overrides)
    return serve.ServerConfig(**settings)


@pytest.fixture(scope="module")
def strict_client(tmp_path_factory, fake_models):
    """One server with small limits shared by the bad-input cases."""
    target = tmp_path_factory.mktemp("strict") / "headlines"
    target.mkdir()
    shutil.copytree(fake_models[0], target / "1")
    app = serve.create_app(_config(target, max_instances=4, max_body_bytes=1000))
    with TestClient(app) as c:
        yield c


@pytest.fixture
def client(model_dir):
    with TestClient(serve.create_app(_config(model_dir))) as c:
        yield c


@contextlib.contextmanager
def _uvicorn(app):
    """Serves `app` on a free loopback port in a thread; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()


# ------------------------------------------------------------------- isolation


def test_server_imports_no_model_code():
    # A fresh interpreter (this one has imported everything). TensorFlow itself
    # loads parts of keras, so what counts is what `models.serve` adds to it.
    probe = (
        "import sys, tensorflow, starlette.applications, starlette.staticfiles\n"
        "before = set(sys.modules)\n"
        "import models.serve\n"
        "models.serve.create_app\n"
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
    assert {"models.serve.app", "models.serve.codec"} <= added
    model_code = {m for m in added if m.startswith(("keras", "models."))}
    allowed = {"models.errors", "models.layout", "models.startup"}
    assert {m for m in model_code if not m.startswith("models.serve")} <= allowed


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
    app = serve.create_app(_config(model_dir, max_queue=1, request_timeout_s=0.2))
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
        serve.create_app(_config(tmp_path / "nothing"))
    with pytest.raises(SystemExit, match="No version folder"):
        serve.main(["--model-dir", str(tmp_path / "nothing")])


# ------------------------------------------------------- batching and hot swapping


def test_concurrent_requests_are_batched(model_dir):
    app = serve.create_app(_config(model_dir, batch_timeout_ms=50))

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

    with _uvicorn(app) as base:
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
    app = serve.create_app(_config(model_dir, poll_seconds=0.2))
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

    with _uvicorn(app) as base:
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


# ------------------------------------------------------------------------ web page


def test_web_page_in_headless_chromium(model_dir, tmp_path):
    # .ci/run installs Debian's chromium; without it this test must fail.
    assert CHROMIUM and os.path.exists(CHROMIUM), (
        f"chromium not found ({CHROMIUM!r}): apt-get install chromium, or set "
        "CHROMIUM to its path"
    )
    from playwright import sync_api

    app = serve.create_app(_config(model_dir))
    article = (
        "Australia 's current account deficit shrunk by a record #.## billion "
        "dollars in the June quarter due to soaring commodity prices ."
    )
    with _uvicorn(app) as base, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            errors = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(base + "/")
            page.get_by_label("Article").fill(article)
            page.get_by_role("button", name="Generate headline").click()
            page.wait_for_selector("#heatmap td.cell", timeout=15_000)
            assert page.text_content("#headline") == "AUSTRALIA 'S CURRENT"
            cells = page.locator("#heatmap td.cell")
            assert cells.count() == 3 * len(article.split())
            # Headline word 2 ("'S") attends to source word 2 only.
            assert cells.nth(len(article.split()) + 1).get_attribute("data-weight") == (
                "1.0000"
            )
            assert page.locator("#heatmap th.src").count() == len(article.split())
            # Labelled with the words as the reader sees them (the fake's:
            # the source upper-cased, the headline lower-cased).
            assert page.locator("#heatmap th.src").first.text_content() == "AUSTRALIA"
            assert page.locator("#heatmap th.hyp").nth(1).text_content() == "'s"
            # The slider starts at the model's default and sends nothing; set
            # to two words, it sends max_length=2.
            assert page.text_content("#max-words-value") == "model default"
            page.get_by_label("Longest headline").fill("2")
            assert page.text_content("#max-words-value") == "2 words"
            page.get_by_role("button", name="Generate headline").click()
            # `expect` polls without `eval`, which the page's CSP forbids.
            sync_api.expect(page.locator("#headline")).to_have_text(
                "AUSTRALIA 'S", timeout=15_000
            )
            assert page.locator("#heatmap tbody tr").count() == 2
            page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
            shot = os.environ.get("SERVE_SCREENSHOT")
            if shot:
                shutil.copy(tmp_path / "page.png", shot)

            # An error is shown in the page, and the page keeps working.
            page.get_by_label("Article").fill("   ")
            page.get_by_role("button", name="Generate headline").click()
            assert "Paste an article" in page.text_content("#status")
            assert not errors
        finally:
            browser.close()
    assert (tmp_path / "page.png").stat().st_size > 0


def test_monitoring_stats_shape(client):
    client.post("/v1/models/headlines:predict", json={"instances": [DOC, DOC]})
    stats = client.get("/monitoring/stats").json()
    assert stats["model_version"] == "1"
    assert stats["instances"] == 2 and stats["batches"] == 1
    # Plain JSON numbers (no NaN, which `json` would write as a bare token).
    json.loads(json.dumps(stats, allow_nan=False))


def test_load_test_tool_smoke(model_dir):
    spec = importlib.util.spec_from_file_location(
        "load_test", Path(__file__).parents[1] / "benchmarks" / "load_test.py"
    )
    load_test = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load_test)
    assert load_test._percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert load_test._percentile([1.0, 2.0, 3.0, 4.0], 99) == 4.0
    with pytest.raises(SystemExit, match="loopback"):
        load_test.parse_args(["--url", "http://example.com:8501"])

    app = serve.create_app(_config(model_dir))
    with _uvicorn(app) as base:
        args = load_test.parse_args(
            ["--url", base, "--concurrency", "4", "--duration", "0.5"]
            + ["--server-pid", str(os.getpid())]
        )
        report = asyncio.run(load_test.run(args))
        answered = app.state.server.requests
        # A signature the export lacks: every answer is an error, counted.
        args.signature, args.duration = "no_such_signature", 0.3
        refused = asyncio.run(load_test.run(args))
        answered_refused = app.state.server.requests - answered
    assert refused["requests_ok"] == 0 and refused["latency_ms"]["p50"] is None
    errors = refused["status_codes"]["400"]
    assert errors > 0 and refused["errors"] == {"HTTP 400": errors}
    assert refused["status_codes"] == {"400": errors}
    assert answered_refused == 1  # the probe alone reached the model
    # Every request the server answered counted as ok, but the tool's probe.
    assert report["requests_ok"] == answered - 1 > 0 and not report["errors"]
    assert report["latency_ms"]["p50"] <= report["latency_ms"]["p99"]
    # The memory read from this process (the server), as /proc reads it now.
    rss = report["server_rss_kib"]
    now = {
        key: int(rest.split()[0])
        for key, _, rest in (
            line.partition(":") for line in Path("/proc/self/status").open()
        )
        if key in ("VmRSS", "VmHWM")
    }
    assert rss["start"]["VmRSS"] <= rss["start"]["VmHWM"] <= rss["end"]["VmHWM"]
    for key in ("VmRSS", "VmHWM"):
        assert 0.5 < rss["end"][key] / now[key] < 2, (rss, now)
    assert report["server_batching"]["batches"] > 0
