"""The server's README promises under real faults, on a real tiny export.

Real `python -m serving` processes (tests/servers.py) serve copies of
the shared trained run's export: the address they bind, a chunked upload
over the body limit, raw UTF-8 text, the batch cap, the command line's
checks, and a version folder's whole life under load (a hot swap, a newer
version that fails to load, one half-written, the served one removed).
"""

import pytest

pytestmark = pytest.mark.tf_only

import base64  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

import httpx  # noqa: E402
import numpy as np  # noqa: E402
from servers import ROOT, Server, listening_addresses  # noqa: E402

from serving import cli  # noqa: E402

LIMIT = 4000  # --max-body-bytes of the main server
POLL_S = 0.25
PREDICT = "/v1/models/headlines:predict"
# Accents, CJK and an emoji (4 bytes in UTF-8), as raw JSON strings.
DOCS = ["café crème au lait .", "東京 株式 市場 ,", "fusée 🚀 naïve"]


def _copy_version(export, model_dir, version):
    """Copies `export` in as `version` the way the exporter does: a rename."""
    tmp = model_dir / f".tmp-copy-{version}"
    shutil.copytree(export, tmp)
    os.replace(tmp, model_dir / str(version))


@pytest.fixture(scope="module")
def servers(trained, tmp_path_factory):
    """`(main, any_host, model_dir, export)`: two servers started side by side.

    `main` binds the default host, with small limits and a fast watcher on
    `model_dir`; `any_host` binds `--host 0.0.0.0` and does not watch.
    """
    export = trained[0] / "export" / "1"
    root = tmp_path_factory.mktemp("server-faults")
    main_dir, any_dir = root / "main", root / "any"
    for folder in (main_dir, any_dir):
        folder.mkdir()
        shutil.copytree(export, folder / "1")
    main = Server(
        main_dir,
        root / "main.log",
        "--max-batch-size",
        "2",
        "--batch-timeout-ms",
        "300",
        "--max-body-bytes",
        str(LIMIT),
        "--poll-seconds",
        str(POLL_S),
    )
    any_host = Server(
        any_dir, root / "any.log", "--host", "0.0.0.0", "--poll-seconds", "0"
    )
    try:
        yield main.wait_ready(), any_host.wait_ready(), main_dir, export
    finally:
        main.stop()
        any_host.stop()


@pytest.mark.slow
def test_binds_loopback_unless_host_says_otherwise(servers):
    main, any_host, _, _ = servers
    assert listening_addresses(main.port) == {"127.0.0.1"}
    assert listening_addresses(any_host.port) == {"0.0.0.0"}


def _chunks(words):
    """A JSON predict body sent in chunks, with no Content-Length."""
    yield b'{"instances": ["'
    for _ in range(words // 100):
        yield b"w1 " * 100
    yield b'"]}'


@pytest.mark.slow
def test_chunked_upload_over_the_limit_is_413(servers):
    main = servers[0]
    small = httpx.post(main.url + PREDICT, content=_chunks(300), timeout=60)
    assert small.request.headers["transfer-encoding"] == "chunked"
    assert "content-length" not in small.request.headers
    assert small.status_code == 200, small.text
    assert len(small.json()["predictions"]) == 1

    big = httpx.post(main.url + PREDICT, content=_chunks(2000), timeout=60)
    assert big.request.headers["transfer-encoding"] == "chunked"
    assert big.status_code == 413
    assert big.json() == {
        "error": f"The request body exceeds the limit of {LIMIT} bytes. "
        f"Received: more than {LIMIT} bytes"
    }


def _outputs(url, documents):
    reply = httpx.post(
        url + PREDICT,
        json={"signature_name": "attention", "inputs": {"documents": documents}},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    return reply.json()["outputs"]


@pytest.mark.slow
def test_raw_utf8_strings_on_predict_and_the_page_api(servers):
    main = servers[1]  # The other server: no batching delay.
    raw = _outputs(main.url, DOCS)
    b64 = [{"b64": base64.b64encode(d.encode("utf-8")).decode()} for d in DOCS]
    assert _outputs(main.url, b64) == raw
    # The words come back as the text they were, in raw UTF-8 JSON.
    tokens = [[t for t in row if t] for row in raw["source_tokens"]]
    # Chinese and Japanese come back a character a word.
    assert tokens == [
        ["café", "crème", "au", "lait", "."],
        ["東", "京", "株", "式", "市", "場", ","],
        ["fusée", "🚀", "naïve"],
    ]
    for i, document in enumerate(DOCS):
        page = httpx.post(
            main.url + "/api/headline", json={"document": document}, timeout=60
        )
        assert page.status_code == 200, page.text
        # Raw UTF-8 in the body, not \u escapes.
        assert tokens[i][0].encode("utf-8") in page.content
        answer = page.json()
        assert answer["headline"] == raw["headlines"][i]
        # The batch's padding ("") is cropped per request.
        assert answer["source_tokens"] == tokens[i]
        assert answer["headline_tokens"] == [t for t in raw["headline_tokens"][i] if t]


@pytest.mark.slow
def test_max_batch_size_caps_a_batch(servers):
    main = servers[0]

    def one(i):
        return httpx.post(
            main.url + "/api/headline", json={"document": f"w{i} w2 w3"}, timeout=60
        )

    with ThreadPoolExecutor(6) as pool:
        replies = list(pool.map(one, range(6)))
    assert [r.status_code for r in replies] == [200] * 6
    sizes = [int(r.headers["x-batch-size"]) for r in replies]
    # Six requests within the 300 ms window: batched, never more than 2.
    assert max(sizes) == 2
    stats = httpx.get(main.url + "/monitoring/stats").json()
    assert stats["max_batch_size_seen"] == 2
    assert set(stats["batch_size_histogram"]) <= {"1", "2"}
    # One request of 5 documents runs in batches of at most 2 too, and
    # answers what 5 requests of one document answer.
    docs = [f"w{i} w5 w6 w7" for i in range(5)]
    five = httpx.post(main.url + PREDICT, json={"instances": docs}, timeout=60)
    assert five.status_code == 200, five.text
    alone = [
        httpx.post(main.url + PREDICT, json={"instances": [d]}, timeout=60).json()
        for d in docs
    ]
    assert five.headers["x-batch-size"] == "2"
    together = five.json()["predictions"]
    assert [p["headlines"] for p in together] == [
        a["predictions"][0]["headlines"] for a in alone
    ]
    # Batch-mates change the float sums' order, not more.
    np.testing.assert_allclose(
        [p["scores"] for p in together],
        [a["predictions"][0]["scores"] for a in alone],
        rtol=1e-5,
    )


@pytest.mark.parametrize(
    "flag",
    [
        "--max-batch-size",
        "--max-queue",
        "--max-body-bytes",
        "--max-instances",
        "--request-timeout-s",
    ],
)
@pytest.mark.parametrize("value", ["0", "-3"])
def test_command_line_rejects_non_positive_values(flag, value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.parse_serve_settings(["--model-dir", "m", f"{flag}={value}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: must be > 0. Received: {value}" in err


@pytest.mark.parametrize("flag", ["--batch-timeout-ms", "--poll-seconds"])
def test_command_line_rejects_negative_times(flag, capsys):
    assert (
        getattr(
            cli.parse_serve_settings(["--model-dir", "m", f"{flag}=0"]),
            flag[2:].replace("-", "_"),
        )
        == 0
    )
    with pytest.raises(SystemExit) as exit_info:
        cli.parse_serve_settings(["--model-dir", "m", f"{flag}=-1"])
    assert exit_info.value.code == 2
    assert f"argument {flag}: must be >= 0. Received: -1" in capsys.readouterr().err


def test_command_line_rejects_zero_in_a_real_process(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "serving", "--model-dir", str(tmp_path)]
        + ["--max-batch-size", "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 2
    assert "argument --max-batch-size: must be > 0. Received: 0" in result.stderr
    assert "Traceback" not in result.stderr


class _Load:
    """Threads posting one document to /api/headline until stopped."""

    def __init__(self, url, threads=2):
        self.url, self.stop = url, threading.Event()
        self.seen = [[] for _ in range(threads)]  # (status, version, headline)
        self.threads = [
            threading.Thread(target=self._post, args=(seen,)) for seen in self.seen
        ]
        for thread in self.threads:
            thread.start()

    def _post(self, seen):
        while not self.stop.is_set():
            reply = httpx.post(
                self.url + "/api/headline", json={"document": DOCS[0]}, timeout=60
            )
            body = reply.json()
            seen.append((reply.status_code, body.get("model_version"), body))

    def wait_for_version(self, version, timeout_s=120):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(s and s[-1][1] == version for s in self.seen):
                return
            time.sleep(0.1)
        raise AssertionError(f"version {version} not served: {self.versions()}")

    def versions(self):
        return [[v for _, v, _ in s] for s in self.seen]

    def finish(self):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=120)
        return [entry for s in self.seen for entry in s]


def _wait_polls(n=6):
    time.sleep(n * POLL_S)


@pytest.mark.slow
def test_version_folders_under_load(servers):
    """Hot swap, a broken version, a half-written one, the served one removed.

    All while two clients keep asking: every answer must be a 200, each
    client must see versions only go up, and the same headline throughout
    (every version holds the same weights).
    """
    main, _, model_dir, export = servers
    load = _Load(main.url)
    try:
        load.wait_for_version("1")
        # Hot swap to a new complete version.
        _copy_version(export, model_dir, 2)
        load.wait_for_version("2")

        # A newer version that fails to load: version 2 goes on, logged once.
        broken = model_dir / ".tmp-broken"
        shutil.copytree(export, broken)
        (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
        os.replace(broken, model_dir / "3")
        _wait_polls()
        assert load.seen[0][-1][1] == "2"
        assert main.log_text().count("Could not load version 3") == 1

        # Half-written by a plain copy: the graph there, the weights not yet.
        half = model_dir / "4"
        half.mkdir()
        shutil.copy2(export / "saved_model.pb", half / "saved_model.pb")
        _wait_polls()
        assert load.seen[0][-1][1] == "2"
        # ...then finished: the complete folder is loaded.
        for child in export.iterdir():
            if child.name != "saved_model.pb":
                copy = shutil.copytree if child.is_dir() else shutil.copy2
                copy(child, half / child.name)
        load.wait_for_version("4")

        # The served version removed: it is in memory and goes on serving.
        shutil.rmtree(model_dir / "4")
        _wait_polls()
        served = len(load.seen[0])
        _wait_polls()
        assert len(load.seen[0]) > served
        assert load.seen[0][-1][1] == "4"
    finally:
        entries = load.finish()
    assert {status for status, _, _ in entries} == {200}
    for versions in load.versions():
        assert versions == sorted(versions, key=int)
        assert set(versions) == {"1", "2", "4"}
    headlines = {body["headline"] for _, _, body in entries}
    assert len(headlines) == 1, headlines
    assert main.log_text().count("Could not load version 3") == 1
