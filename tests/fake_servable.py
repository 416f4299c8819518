"""A fake headline SavedModel with the export's signatures, and ways to serve it.

Shared by the server's tests (test_serve.py, test_serve_lengths.py,
test_serve_page.py). The fake `headlines` model writes the first three words
of a document (upper-cased in version 1, lower-cased in version 2) and
attends from headline word `t` to source word `t`, so every answer can be
checked exactly. Its signatures are those `models/decoding/headline_module.py`
defines; a real export is served in test_serve_export.py.
"""

import contextlib
import json
import os
import shutil
import socket
import threading
import time
import warnings
from pathlib import Path

import tensorflow as tf
import uvicorn

with warnings.catch_warnings():  # Starlette nags about httpx vs httpx2.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

import serving as serve

__all__ = [
    "DOC",
    "FAKE_OPTIONS",
    "FakeHeadlines",
    "TestClient",
    "headlines_folder",
    "save_fake",
    "serve_in_thread",
    "server_config",
]

DOC = "Alpha Beta Gamma delta epsilon"


DOCS_SPEC = tf.TensorSpec([None], tf.string, name="documents")
# The fake's `search_options.json`: `length_control` with these values
# answers what `serving_default` answers.
FAKE_OPTIONS = {"min_length": 0, "max_length": 3, "length_penalty": 1.0}


class FakeHeadlines(tf.Module):
    """The fake model: `serve`, `attention` and `length_control`."""

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

    @tf.function(input_signature=[DOCS_SPEC])
    def serve(self, documents):
        out = self._outputs(documents)
        return {k: out[k] for k in ("headlines", "scores")}

    @tf.function(input_signature=[DOCS_SPEC])
    def attention(self, documents):
        return self._outputs(documents)

    @tf.function(
        input_signature=[
            DOCS_SPEC,
            tf.TensorSpec([], tf.int32, name="min_length"),
            tf.TensorSpec([], tf.int32, name="max_length"),
            tf.TensorSpec([], tf.float32, name="length_penalty"),
        ]
    )
    def length_control(self, documents, min_length, max_length, length_penalty):
        # Three words, or as many as the lengths demand.
        words = tf.minimum(tf.maximum(3, min_length), max_length)
        return self._outputs(documents, words, length_penalty)


def save_fake(path: Path, upper: bool) -> None:
    """Saves the fake as a version folder, atomically."""
    module = FakeHeadlines(upper)
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


def headlines_folder(root: Path, version_1: Path) -> Path:
    """`root / "headlines"` holding a copy of `version_1` as version 1."""
    target = root / "headlines"
    target.mkdir()
    shutil.copytree(version_1, target / "1")
    return target


def server_config(model_dir, **overrides):
    """`serve.ServerConfig` for `model_dir`: no polling, a 2 ms batch window."""
    settings = dict(model_dir=str(model_dir), poll_seconds=0, batch_timeout_ms=2)
    settings.update(overrides)
    return serve.ServerConfig(**settings)


@contextlib.contextmanager
def serve_in_thread(app):
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
