"""Length settings per request (`min_length`, `max_length`, `length_penalty`).

Against test_serve.py's stand-in model, whose `length_control` signature
writes the first three words, or as many as the lengths demand, and scores
`-length_penalty * source words`.
"""

import pytest

pytestmark = pytest.mark.tf_only

import shutil  # noqa: E402

import numpy as np  # noqa: E402
from fake_servable import DOC, TestClient, save_fake, server_config  # noqa: E402

import serving as serve  # noqa: E402
from serving.batcher import Batcher, Job  # noqa: E402

URL = "/v1/models/headlines:predict"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("lengths")
    save_fake(root / "v1", upper=True)
    target = root / "headlines"
    target.mkdir()
    shutil.copytree(root / "v1", target / "1")
    with TestClient(serve.create_app(server_config(target))) as c:
        yield c


def test_length_fields_run_the_length_control_signature(client):
    docs = [DOC, "one two"]

    def predict(**fields):
        resp = client.post(URL, json={"instances": docs, **fields})
        assert resp.status_code == 200, resp.text
        return resp.json()["predictions"]

    default = predict()
    assert predict(min_length=0, max_length=3, length_penalty=1) == default
    # serving_default's outputs only, with the lengths applied.
    assert predict(max_length=2) == [
        {"headlines": "ALPHA BETA", "scores": -5.0},
        {"headlines": "ONE TWO", "scores": -2.0},
    ]
    # The fake's default maximum (3) caps a longer minimum, as the export's
    # max_length does; the penalty reaches the scores.
    assert predict(min_length=4, length_penalty=0.5) == [
        {"headlines": "ALPHA BETA GAMMA", "scores": -2.5},
        {"headlines": "ONE TWO", "scores": -1.0},
    ]
    attention = client.post(
        URL,
        json={"signature_name": "attention", "instances": [DOC], "max_length": 1},
    ).json()["predictions"][0]
    assert attention["headline_tokens"] == ["ALPHA"]
    assert len(attention["attention"]) == 1
    # Scalar inputs of length_control named directly come from the fields.
    direct = client.post(
        URL,
        json={"signature_name": "length_control", "inputs": docs, "max_length": 1},
    ).json()["outputs"]
    assert direct["headlines"] == ["ALPHA", "ONE"]

    page = client.post("/api/headline", json={"document": DOC, "max_length": 2})
    assert page.status_code == 200, page.text
    assert page.json()["headline"] == "ALPHA BETA"
    assert page.json()["headline_tokens"] == ["ALPHA", "BETA"]


def test_batches_never_mix_length_settings():
    class Recorder:
        def __init__(self):
            self.calls = []

        def run(self, signature, inputs):
            self.calls.append((inputs["documents"], inputs.get("max_length")))
            limit = inputs.get("max_length")
            return {
                "headlines": np.array([f"{d}/{limit}" for d in inputs["documents"]])
            }

    servable = Recorder()
    batcher = Batcher(max_batch_size=64, timeout_s=0.0, max_queue=16)
    jobs = [
        Job(servable, "length_control", {"documents": [doc]}, 1, params)
        for doc, params in [
            ("a", {"max_length": 2}),
            ("b", {"max_length": 5}),
            ("c", {"max_length": 2}),
            ("d", {}),
        ]
    ]
    for job in jobs:  # Queued before the worker starts: collected together.
        batcher.submit(job)
    batcher.start()
    try:
        results = [
            job.future.result(timeout=10)[0]["headlines"].tolist() for job in jobs
        ]
    finally:
        batcher.stop()
    assert results == [["a/2"], ["b/5"], ["c/2"], ["d/None"]]
    assert sorted(servable.calls, key=str) == sorted(
        [(["a", "c"], 2), (["b"], 5), (["d"], None)], key=str
    )


@pytest.mark.parametrize(
    "path, body, fragment",
    [
        (
            URL,
            {"instances": [DOC], "min_length": -1},
            "`min_length` must be an integer >= 0. Received: min_length=-1",
        ),
        (
            URL,
            {"instances": [DOC], "max_length": 2.5},
            "`max_length` must be an integer >= 1. Received: max_length=2.5",
        ),
        (
            URL,
            {"instances": [DOC], "max_length": True},
            "Received: max_length=true",
        ),
        (
            URL,
            {"instances": [DOC], "min_length": 4, "max_length": 2},
            "Received: min_length=4, max_length=2",
        ),
        (
            URL,
            {"instances": [DOC], "length_penalty": "long"},
            'Received: length_penalty="long"',
        ),
        (
            URL,
            {"signature_name": "greedy", "instances": [DOC], "max_length": 2},
            "apply to beam search",
        ),
        ("/api/headline", {"document": DOC, "max_length": 0}, "max_length=0"),
    ],
)
def test_bad_length_fields_are_a_one_line_400(client, path, body, fragment):
    resp = client.post(path, json=body)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert fragment in error and "\n" not in error
