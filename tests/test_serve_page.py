"""The server's web page in a headless browser, and the load generator
(`benchmarks/load_test.py`) against the server, both on the fake SavedModel
of `fake_servable.py`."""

import pytest

pytestmark = pytest.mark.tf_only

import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from fake_servable import (  # noqa: E402
    headlines_folder,
    save_fake,
    serve_in_thread,
    server_config,
)

import serving as serve  # noqa: E402

# Debian's `chromium`, Ubuntu's `chromium-browser`, or any in $CHROMIUM.
CHROMIUM = (
    os.environ.get("CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


# What `training.json` records of a model that loses to the lead baseline.
FAILED_CHECK = {
    "split": "validation",
    "examples": 500,
    "baseline": "lead_8",
    "model": {"rouge1": 30.22, "rouge2": 3.13, "rougeL": 19.21},
    "lead_baseline": {"rouge1": 27.52, "rouge2": 12.47, "rougeL": 25.28},
    "beats_lead_baseline": False,
}


@pytest.fixture
def model_dir(tmp_path):
    save_fake(tmp_path / "v1", upper=True)
    folder = headlines_folder(tmp_path, tmp_path / "v1")
    record = {"validation_check": FAILED_CHECK}
    (folder / "1" / "training.json").write_text(json.dumps(record))
    return folder


def test_web_page_in_headless_chromium(model_dir, tmp_path):
    # .ci/run installs Debian's chromium; without it this test must fail.
    assert CHROMIUM and os.path.exists(CHROMIUM), (
        f"chromium not found ({CHROMIUM!r}): apt-get install chromium, or set "
        "CHROMIUM to its path"
    )
    from playwright import sync_api

    app = serve.create_app(server_config(model_dir))
    article = (
        "Australia 's current account deficit shrunk by a record #.## billion "
        "dollars in the June quarter due to soaring commodity prices ."
    )
    with serve_in_thread(app) as base, sync_api.sync_playwright() as p:
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
            # The export's validation check: this model loses to the lead.
            assert page.locator("#check").is_visible()
            assert page.text_content("#check") == (
                "Not trained enough: on validation this model does not beat the "
                "lead_8 baseline (the document's first words): ROUGE-1/2/L "
                "30.22 / 3.13 / 19.21 against 27.52 / 12.47 / 25.28."
            )
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


def test_load_test_tool_smoke(model_dir):
    from benchmarks import load_test

    assert load_test.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert load_test.percentile([1.0, 2.0, 3.0, 4.0], 99) == 4.0
    with pytest.raises(SystemExit, match="loopback"):
        load_test.parse_args(["--url", "http://example.com:8501"])

    app = serve.create_app(server_config(model_dir))
    with serve_in_thread(app) as base:
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
