"""A small TensorFlow-Serving-compatible REST server for the headline SavedModel.

Run it with:

```
python -m models.serve --model-dir saved_models/headlines --port 8501
```

It speaks TensorFlow Serving's REST API (`/v1/models/<name>[:predict|/metadata]`,
row and columnar formats, `/versions/<v>` paths), batches requests that arrive
within a few milliseconds into one call of the signature, hot-swaps to a newer
integer version folder when one appears, and serves a web page at `/` that shows
the headline and its attention heatmap.

Only TensorFlow, numpy, starlette and uvicorn are needed: this module must never
import the model-building code (`keras_attn` or other `models/` modules), so that
it can run anywhere the SavedModel can.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import concurrent.futures
import contextlib
import json
import logging
import math
import os
import queue
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.middleware import Middleware  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import FileResponse, Response  # noqa: E402
from starlette.routing import Mount, Route  # noqa: E402
from starlette.staticfiles import StaticFiles  # noqa: E402
from tensorflow.core.protobuf import saved_model_pb2  # noqa: E402

logger = logging.getLogger("models.serve")

STATIC_DIR = Path(__file__).resolve().parent / "static"
DEFAULT_SIGNATURE = "serving_default"
# Outputs of the `attention` signature padded to the longest row of the *batch*;
# they are trimmed per request so a response never depends on its batch-mates.
_PADDED_TOKEN_OUTPUTS = ("source_tokens", "headline_tokens")


@dataclass
class ServerConfig:
    """Settings of one server; the CLI flags map one-to-one onto these fields."""

    model_dir: str
    model_name: str = "headlines"
    max_batch_size: int = 64
    batch_timeout_ms: float = 5.0
    max_queue: int = 256
    max_body_bytes: int = 1_000_000
    max_instances: int = 64
    request_timeout_s: float = 30.0
    poll_seconds: float = 2.0


class ApiError(Exception):
    """An error answered as `{"error": message}` with an HTTP status code."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


# --------------------------------------------------------------------------- model


def _version_dirs(model_dir: Path) -> list[tuple[int, Path]]:
    """Complete integer version folders of `model_dir`, oldest first."""
    found = []
    if not model_dir.is_dir():
        return found
    for child in model_dir.iterdir():
        # The exporter writes into a temporary folder and renames it, so an
        # integer-named folder holding saved_model.pb is complete.
        if child.name.isdigit() and (child / "saved_model.pb").is_file():
            found.append((int(child.name), child))
    return sorted(found)


def _signature_defs(path: Path) -> dict[str, Any]:
    """`SignatureDef`s of a SavedModel rendered as TF Serving renders them."""
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((path / "saved_model.pb").read_bytes())
    meta_graph = proto.meta_graphs[0]
    defs = {}
    for name, sig in meta_graph.signature_def.items():
        if name.startswith("__"):  # __saved_model_init_op is not servable.
            continue
        try:
            rendered = json_format.MessageToDict(
                sig,
                preserving_proto_field_name=True,
                always_print_fields_with_no_presence=True,
            )
        except TypeError:  # protobuf < 5.26 spells the option differently.
            rendered = json_format.MessageToDict(
                sig,
                preserving_proto_field_name=True,
                including_default_value_fields=True,
            )
        defs[name] = rendered
    return defs


@dataclass
class Servable:
    """One loaded version of the model and what is known about its signatures."""

    version: int
    path: Path
    loaded: Any
    signatures: dict[str, Any]
    # signature -> input name -> tf.DType, and signature -> output names.
    input_dtypes: dict[str, dict[str, tf.DType]]
    output_names: dict[str, list[str]]
    signature_defs: dict[str, Any]

    @classmethod
    def load(cls, version: int, path: Path) -> Servable:
        loaded = tf.saved_model.load(str(path))
        signatures = dict(loaded.signatures)
        if not signatures:
            raise ValueError(f"SavedModel at {path} has no signatures.")
        input_dtypes, output_names = {}, {}
        for name, fn in signatures.items():
            _, kwargs = fn.structured_input_signature
            input_dtypes[name] = {k: spec.dtype for k, spec in kwargs.items()}
            output_names[name] = sorted(fn.structured_outputs)
        return cls(
            version=version,
            path=path,
            loaded=loaded,
            signatures=signatures,
            input_dtypes=input_dtypes,
            output_names=output_names,
            signature_defs=_signature_defs(path),
        )

    def run(self, signature: str, inputs: dict[str, list]) -> dict[str, np.ndarray]:
        fn = self.signatures[signature]
        dtypes = self.input_dtypes[signature]
        tensors = {k: tf.constant(v, dtype=dtypes[k]) for k, v in inputs.items()}
        return {k: v.numpy() for k, v in fn(**tensors).items()}

    def warm_up(self) -> None:
        """Calls every signature once so the first request pays no first-call cost."""
        for name, dtypes in self.input_dtypes.items():
            if all(d == tf.string for d in dtypes.values()):
                self.run(name, {k: ["warm up"] for k in dtypes})


class ModelManager:
    """Holds the servable in use and swaps in newer versions found on disk.

    Requests capture `current` once when they are accepted and run on that
    servable, so a swap never touches work in flight: the old version is freed
    when the last request holding it finishes.
    """

    def __init__(self, model_dir: str | os.PathLike, poll_seconds: float = 2.0):
        self.model_dir = Path(model_dir)
        self.poll_seconds = poll_seconds
        versions = _version_dirs(self.model_dir)
        if not versions:
            raise FileNotFoundError(
                f"No version folder with a saved_model.pb in {self.model_dir} "
                "(expected <model-dir>/<integer version>/saved_model.pb)."
            )
        version, path = versions[-1]
        servable = Servable.load(version, path)
        servable.warm_up()
        self.current: Servable = servable
        self._failed: set[int] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.poll_seconds > 0 and self._thread is None:
            self._thread = threading.Thread(
                target=self._watch, name="model-watcher", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def poll_once(self) -> bool:
        """Loads the newest version if it is newer than the one served.

        Returns:
            Whether a new version was switched to.
        """
        versions = [
            (v, p)
            for v, p in _version_dirs(self.model_dir)
            if v > self.current.version and v not in self._failed
        ]
        if not versions:
            return False
        version, path = versions[-1]
        try:
            servable = Servable.load(version, path)
            servable.warm_up()
        except Exception as exc:  # Keep serving the old version.
            self._failed.add(version)
            logger.error("Could not load version %d from %s: %s", version, path, exc)
            return False
        old = self.current.version
        self.current = servable  # One reference assignment: atomic for readers.
        logger.warning("Switched model from version %d to version %d", old, version)
        return True

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            try:
                self.poll_once()
            except Exception:  # The watcher must outlive odd file-system states.
                logger.exception("Model watcher failed; retrying")


# ------------------------------------------------------------------------ batching


@dataclass
class _Job:
    servable: Servable
    signature: str
    inputs: dict[str, list]
    size: int
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)

    @property
    def key(self) -> tuple[int, str]:
        return id(self.servable), self.signature


_STOP = object()


class Batcher:
    """Merges requests that arrive close together into one signature call.

    A single worker thread owns every model call. It blocks for a first job, then
    keeps collecting jobs for up to `timeout_s` or until `max_batch_size`
    instances are waiting, groups them by (servable, signature), and runs each
    group as one batch. The queue is bounded so overload is answered at once
    (503) instead of growing latency without limit.
    """

    def __init__(self, max_batch_size: int, timeout_s: float, max_queue: int):
        self.max_batch_size = max_batch_size
        self.timeout_s = timeout_s
        self._queue: queue.Queue = queue.Queue(maxsize=max_queue)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.batches = 0
        self.instances = 0
        self.jobs = 0
        self.max_batch_seen = 0
        self.multi_job_batches = 0
        self.batch_sizes: Counter = Counter()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="batcher", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            try:  # Jobs queued ahead of the sentinel still get their answers.
                self._queue.put(_STOP, timeout=30)
            except queue.Full:
                logger.error("Batcher queue stayed full; worker not stopped cleanly")
            self._thread.join(timeout=30)
            self._thread = None

    def submit(self, job: _Job) -> None:
        """Queues `job`; raises `queue.Full` when the queue is at capacity."""
        self._queue.put_nowait(job)

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "batches": self.batches,
                "jobs": self.jobs,
                "instances": self.instances,
                "max_batch_size_seen": self.max_batch_seen,
                "multi_request_batches": self.multi_job_batches,
                "batch_size_histogram": {
                    str(k): v for k, v in sorted(self.batch_sizes.items())
                },
                "queue_depth": self.queue_depth,
            }

    def _collect(self, first: _Job) -> tuple[list[_Job], bool]:
        jobs, size = [first], first.size
        deadline = time.monotonic() + self.timeout_s
        while size < self.max_batch_size:
            remaining = deadline - time.monotonic()
            try:
                job = (
                    self._queue.get(timeout=remaining)
                    if remaining > 0
                    else self._queue.get_nowait()
                )
            except queue.Empty:
                break
            if job is _STOP:
                return jobs, True
            jobs.append(job)
            size += job.size
        return jobs, False

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            jobs, stop = self._collect(first)
            groups: dict[tuple[int, str], list[_Job]] = {}
            for job in jobs:
                groups.setdefault(job.key, []).append(job)
            for group in groups.values():
                for chunk in self._chunks(group):
                    self._run_chunk(chunk)
            if stop:
                return

    def _chunks(self, jobs: list[_Job]):
        chunk, size = [], 0
        for job in jobs:
            if chunk and size + job.size > self.max_batch_size:
                yield chunk
                chunk, size = [], 0
            chunk.append(job)
            size += job.size
        if chunk:
            yield chunk

    def _run_chunk(self, jobs: list[_Job]) -> None:
        # Jobs whose client already timed out are dropped before any work.
        jobs = [j for j in jobs if j.future.set_running_or_notify_cancel()]
        if not jobs:
            return
        try:
            self._run_batch(jobs)
        except Exception as exc:
            if len(jobs) == 1:
                jobs[0].future.set_exception(exc)
                return
            # One bad request must not fail its batch-mates: retry one by one.
            for job in jobs:
                try:
                    self._run_batch([job])
                except Exception as single_exc:
                    job.future.set_exception(single_exc)

    def _run_batch(self, jobs: list[_Job]) -> None:
        servable, signature = jobs[0].servable, jobs[0].signature
        merged = {name: [] for name in jobs[0].inputs}
        for job in jobs:
            for name, values in job.inputs.items():
                merged[name].extend(values)
        total = sum(job.size for job in jobs)
        outputs = servable.run(signature, merged)
        with self._lock:
            self.batches += 1
            self.jobs += len(jobs)
            self.instances += total
            self.max_batch_seen = max(self.max_batch_seen, total)
            self.multi_job_batches += len(jobs) > 1
            self.batch_sizes[total] += 1
        start = 0
        for job in jobs:
            end = start + job.size
            part = {}
            for name, value in outputs.items():
                batched = value.ndim > 0 and value.shape[0] == total
                part[name] = value[start:end] if batched else value
            job.future.set_result((part, len(jobs), total))
            start = end


# ------------------------------------------------------------------ JSON <-> numpy


def _decode_string(value: Any, where: str) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and set(value) == {"b64"}:
        try:
            return base64.b64decode(value["b64"], validate=True)
        except (ValueError, TypeError) as exc:
            raise ApiError(400, f"{where}: invalid base64 in 'b64': {exc}") from None
    raise ApiError(
        400,
        f'{where}: expected a string (or {{"b64": ...}}), got '
        f"{type(value).__name__} {_preview(value)}.",
    )


def _preview(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _convert(value: Any, dtype: tf.DType, where: str) -> Any:
    if dtype == tf.string:
        return _decode_string(value, where)
    if isinstance(value, (bool, int, float)) or value is None:
        if value is None or (isinstance(value, bool) and dtype != tf.bool):
            raise ApiError(400, f"{where}: expected a number, got {_preview(value)}.")
        return value
    if isinstance(value, list):
        return [_convert(v, dtype, f"{where}[{i}]") for i, v in enumerate(value)]
    raise ApiError(400, f"{where}: expected a number, got {_preview(value)}.")


def _parse_row(
    instances: Any, dtypes: dict[str, tf.DType]
) -> tuple[dict[str, list], int]:
    if not isinstance(instances, list):
        raise ApiError(
            400, f"'instances' must be a list, got {type(instances).__name__}."
        )
    if not instances:
        raise ApiError(400, "'instances' is an empty list: send at least one.")
    names = sorted(dtypes)
    inputs: dict[str, list] = {name: [] for name in names}
    for i, instance in enumerate(instances):
        where = f"instances[{i}]"
        named = isinstance(instance, dict) and set(instance) != {"b64"}
        if named:
            unknown = sorted(set(instance) - set(names))
            missing = sorted(set(names) - set(instance))
            if unknown or missing:
                raise ApiError(
                    400,
                    f"{where}: keys {sorted(instance)} do not match the signature "
                    f"inputs {names}"
                    + (f" (unknown: {unknown})" if unknown else "")
                    + (f" (missing: {missing})" if missing else "")
                    + ".",
                )
            for name in names:
                inputs[name].append(
                    _convert(instance[name], dtypes[name], f"{where}.{name}")
                )
        elif len(names) == 1:
            inputs[names[0]].append(_convert(instance, dtypes[names[0]], where))
        else:
            raise ApiError(
                400,
                f"{where}: the signature has several inputs {names}, so each "
                "instance must be an object naming them.",
            )
    return inputs, len(instances)


def _parse_columnar(
    columns: Any, dtypes: dict[str, tf.DType]
) -> tuple[dict[str, list], int]:
    names = sorted(dtypes)
    named = isinstance(columns, dict) and set(columns) != {"b64"}
    if not named:
        if len(names) != 1:
            raise ApiError(
                400,
                f"'inputs': the signature has several inputs {names}, so 'inputs' "
                "must be an object naming them.",
            )
        columns = {names[0]: columns}
    unknown = sorted(set(columns) - set(names))
    missing = sorted(set(names) - set(columns))
    if unknown or missing:
        raise ApiError(
            400,
            f"'inputs': keys {sorted(columns)} do not match the signature inputs "
            f"{names}"
            + (f" (unknown: {unknown})" if unknown else "")
            + (f" (missing: {missing})" if missing else "")
            + ".",
        )
    inputs, size = {}, None
    for name in names:
        column = columns[name]
        if not isinstance(column, list):
            raise ApiError(
                400,
                f"'inputs.{name}' must be a list (one entry per example), got "
                f"{type(column).__name__}.",
            )
        if not column:
            raise ApiError(400, f"'inputs.{name}' is an empty list.")
        if size is not None and len(column) != size:
            raise ApiError(
                400,
                f"'inputs' columns have different lengths: {size} and "
                f"{len(column)} ({name}).",
            )
        size = len(column)
        inputs[name] = [
            _convert(v, dtypes[name], f"inputs.{name}[{i}]")
            for i, v in enumerate(column)
        ]
    return inputs, size


def _to_json(value: np.ndarray | Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):
        if value.dtype == object or value.dtype.kind == "S":
            return [_to_json(v) for v in value] if value.ndim else _to_json(value[()])
        value = value.tolist()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/Infinity.
    return value


def _trim_padding(outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Cuts batch padding of the `attention` signature to this request's rows."""
    if not all(k in outputs for k in _PADDED_TOKEN_OUTPUTS):
        return outputs
    src, hyp = outputs["source_tokens"], outputs["headline_tokens"]
    if src.ndim != 2 or hyp.ndim != 2:
        return outputs

    def used(tokens: np.ndarray) -> int:
        nonempty = np.vectorize(len, otypes=[int])(tokens) > 0 if tokens.size else None
        if nonempty is None or not nonempty.any():
            return 0
        return int(np.nonzero(nonempty.any(axis=0))[0][-1]) + 1

    s, t = used(src), used(hyp)
    trimmed = dict(outputs)
    trimmed["source_tokens"] = src[:, :s]
    trimmed["headline_tokens"] = hyp[:, :t]
    att = outputs.get("attention")
    if att is not None and att.ndim == 3:
        trimmed["attention"] = att[:, :t, :s]
    return trimmed


# ------------------------------------------------------------------------- the app


_MODEL_PATH = re.compile(
    r"^(?P<name>[^/:]+)"
    r"(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"
    r"(?P<tail>/metadata|:[A-Za-z]+)?$"
)


def _json_response(payload: Any, status: int = 200, headers=None) -> Response:
    body = json.dumps(payload, ensure_ascii=False, allow_nan=False)
    return Response(body, status, headers=headers, media_type="application/json")


def _error(status: int, message: str) -> Response:
    return _json_response({"error": message}, status)


class HeadlineServer:
    """The Starlette app plus the model manager and batcher it owns."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.manager = ModelManager(config.model_dir, config.poll_seconds)
        self.batcher = Batcher(
            config.max_batch_size, config.batch_timeout_ms / 1000.0, config.max_queue
        )
        self.requests = 0
        self.errors: Counter = Counter()
        self.started = time.time()
        self.app = Starlette(
            routes=[
                Route("/", self.index, methods=["GET"]),
                Route("/api/headline", self.api_headline, methods=["POST"]),
                Route("/monitoring/stats", self.stats, methods=["GET"]),
                Route("/v1/models/{rest:path}", self.models, methods=["GET", "POST"]),
                Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
            ],
            middleware=[Middleware(_AccessLog)],
            lifespan=self._lifespan,
        )

    # Starting threads in the lifespan (not __init__) keeps an app that is built
    # but never served from leaking threads.
    @contextlib.asynccontextmanager
    async def _lifespan(self, app):
        self.batcher.start()
        self.manager.start()
        try:
            yield
        finally:
            self.manager.stop()
            await asyncio.to_thread(self.batcher.stop)

    # ---- routes

    async def index(self, request: Request) -> Response:
        return FileResponse(
            STATIC_DIR / "index.html",
            headers={
                # The page uses only its own script and style: nothing else runs.
                "Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
                "Cache-Control": "no-cache",
            },
        )

    async def stats(self, request: Request) -> Response:
        servable = self.manager.current
        return _json_response(
            {
                "model_name": self.config.model_name,
                "model_version": str(servable.version),
                "requests": self.requests,
                "errors": dict(self.errors),
                "uptime_s": round(time.time() - self.started, 3),
                **self.batcher.stats(),
            }
        )

    async def models(self, request: Request) -> Response:
        try:
            return await self._models(request)
        except ApiError as exc:
            self.errors[exc.status] += 1
            return _error(exc.status, exc.message)

    async def _models(self, request: Request) -> Response:
        match = _MODEL_PATH.match(request.path_params["rest"])
        if not match:
            raise ApiError(404, f"Unknown path: {request.url.path}")
        name, version, label, tail = match.group("name", "version", "label", "tail")
        if label is not None:
            raise ApiError(
                404, f"Labels are not supported by this server (got label '{label}')."
            )
        is_post = request.method == "POST"
        if tail in (None, "/metadata"):
            if is_post:
                raise ApiError(405, f"Use GET for {request.url.path}.")
            servable = self._servable(name, version)
            if tail is None:
                return _json_response(self._status(servable))
            return _json_response(self._metadata(servable))
        if tail in (":classify", ":regress"):
            raise ApiError(
                400, f"'{tail[1:]}' is not supported: this model only serves predict."
            )
        if tail != ":predict":
            raise ApiError(404, f"Unknown method '{tail[1:]}' in {request.url.path}.")
        if not is_post:
            raise ApiError(405, f"Use POST for {request.url.path}.")
        servable = self._servable(name, version)
        payload = await self._read_json(request)
        return await self._predict(servable, payload)

    async def api_headline(self, request: Request) -> Response:
        """Endpoint for the web page: one document -> tokens + attention matrix."""
        try:
            payload = await self._read_json(request)
            if not isinstance(payload, dict) or set(payload) != {"document"}:
                raise ApiError(400, 'Expected a JSON object {"document": "..."}.')
            document = payload["document"]
            if not isinstance(document, str) or not document.strip():
                raise ApiError(400, "'document' must be a non-empty string.")
            servable = self.manager.current
            signature = "attention"
            if signature not in servable.signatures:
                signature = DEFAULT_SIGNATURE
            dtypes = servable.input_dtypes[signature]
            if len(dtypes) != 1:
                raise ApiError(400, f"Signature '{signature}' needs several inputs.")
            inputs = {next(iter(dtypes)): [document.encode("utf-8")]}
            outputs, batch_requests, batch_size = await self._call(
                servable, signature, inputs, 1
            )
        except ApiError as exc:
            self.errors[exc.status] += 1
            return _error(exc.status, exc.message)
        outputs = _trim_padding(outputs)
        first = {k: _to_json(v[0] if v.ndim else v) for k, v in outputs.items()}
        return _json_response(
            {
                "model_name": self.config.model_name,
                "model_version": str(servable.version),
                "headline": first.get("headlines"),
                "score": first.get("scores"),
                "source_tokens": first.get("source_tokens", []),
                "headline_tokens": first.get("headline_tokens", []),
                "attention": first.get("attention", []),
            },
            headers=_batch_headers(batch_requests, batch_size),
        )

    # ---- helpers

    def _servable(self, name: str, version: str | None) -> Servable:
        servable = self.manager.current  # Read once: stable for this request.
        if name != self.config.model_name:
            spec = f"Specific({name}, {version})" if version else f"Latest({name})"
            raise ApiError(404, f"Servable not found for request: {spec}")
        if version is not None and version != str(servable.version):
            raise ApiError(
                404,
                f"Servable not found for request: Specific({name}, {version}) "
                f"(serving version {servable.version})",
            )
        return servable

    def _status(self, servable: Servable) -> dict[str, Any]:
        return {
            "model_version_status": [
                {
                    "version": str(servable.version),
                    "state": "AVAILABLE",
                    "status": {"error_code": "OK", "error_message": ""},
                }
            ]
        }

    def _metadata(self, servable: Servable) -> dict[str, Any]:
        return {
            "model_spec": {
                "name": self.config.model_name,
                "signature_name": "",
                "version": str(servable.version),
            },
            "metadata": {"signature_def": {"signature_def": servable.signature_defs}},
        }

    async def _read_json(self, request: Request) -> Any:
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise ApiError(
                413, f"Request body of {declared} bytes exceeds the limit of {limit}."
            )
        chunks, size = [], 0
        async for chunk in request.stream():  # Also bounds chunked uploads.
            size += len(chunk)
            if size > limit:
                raise ApiError(413, f"Request body exceeds the limit of {limit} bytes.")
            chunks.append(chunk)
        body = b"".join(chunks)
        if not body.strip():
            raise ApiError(400, "Empty request body: expected a JSON object.")
        try:  # Decode first: json.loads(bytes) would guess UTF-16/32 too.
            return json.loads(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ApiError(400, f"Request body is not valid UTF-8: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ApiError(400, f"Malformed JSON body: {exc}") from None

    async def _predict(self, servable: Servable, payload: Any) -> Response:
        if not isinstance(payload, dict):
            raise ApiError(
                400,
                f"Expected a JSON object with 'instances' or 'inputs', got "
                f"{type(payload).__name__}.",
            )
        unknown = sorted(set(payload) - {"signature_name", "instances", "inputs"})
        if unknown:
            raise ApiError(
                400,
                f"Unknown field(s) {unknown}: a predict request has 'instances' "
                "(row format) or 'inputs' (columnar format), and optionally "
                "'signature_name'.",
            )
        if ("instances" in payload) == ("inputs" in payload):
            raise ApiError(
                400,
                "Missing 'inputs' or 'instances' key"
                if "instances" not in payload
                else "Send either 'instances' or 'inputs', not both.",
            )
        signature = payload.get("signature_name", DEFAULT_SIGNATURE)
        if not isinstance(signature, str):
            raise ApiError(400, "'signature_name' must be a string.")
        signature = signature or DEFAULT_SIGNATURE
        if signature not in servable.signatures:
            raise ApiError(
                400,
                f'Serving signature name: "{signature}" not found in signature def '
                f"(available: {sorted(servable.signatures)})",
            )
        dtypes = servable.input_dtypes[signature]
        row = "instances" in payload
        if row:
            inputs, size = _parse_row(payload["instances"], dtypes)
        else:
            inputs, size = _parse_columnar(payload["inputs"], dtypes)
        if size > self.config.max_instances:
            raise ApiError(
                400,
                f"Too many instances: got {size}, the limit is "
                f"{self.config.max_instances} per request.",
            )
        outputs, batch_requests, batch_size = await self._call(
            servable, signature, inputs, size
        )
        outputs = _trim_padding(outputs)
        names = servable.output_names[signature]
        headers = _batch_headers(batch_requests, batch_size)
        if row:
            columns = {k: _to_json(outputs[k]) for k in names}
            if len(names) == 1:
                predictions = columns[names[0]]
            else:
                predictions = [{k: columns[k][i] for k in names} for i in range(size)]
            return _json_response({"predictions": predictions}, headers=headers)
        if len(names) == 1:
            return _json_response(
                {"outputs": _to_json(outputs[names[0]])}, headers=headers
            )
        return _json_response(
            {"outputs": {k: _to_json(outputs[k]) for k in names}}, headers=headers
        )

    async def _call(self, servable, signature, inputs, size):
        self.requests += 1
        job = _Job(servable, signature, inputs, size)
        try:
            self.batcher.submit(job)
        except queue.Full:
            raise ApiError(
                503,
                f"Server overloaded: {self.config.max_queue} requests already "
                "queued; retry later.",
            ) from None
        try:
            return await asyncio.wait_for(
                asyncio.wrap_future(job.future), self.config.request_timeout_s
            )
        except asyncio.TimeoutError:
            job.future.cancel()  # The worker skips it if it has not started yet.
            raise ApiError(
                504,
                f"Request timed out after {self.config.request_timeout_s:g} s.",
            ) from None
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as exc:
            raise ApiError(400, _tf_message(exc)) from None
        except Exception as exc:
            logger.exception("Model call failed")
            raise ApiError(500, f"Model call failed: {_tf_message(exc)}") from None


def _tf_message(exc: Exception) -> str:
    message = getattr(exc, "message", None) or str(exc)
    return message.strip().splitlines()[0] if message.strip() else type(exc).__name__


def _batch_headers(batch_requests: int, batch_size: int) -> dict[str, str]:
    return {"X-Batch-Requests": str(batch_requests), "X-Batch-Size": str(batch_size)}


class _AccessLog:
    """Pure ASGI middleware: one INFO line per HTTP request (quiet by default)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not logger.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 0}

        async def send_wrapper(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            logger.info(
                "%s %s %d %.1fms",
                scope["method"],
                scope["path"],
                status["code"],
                (time.perf_counter() - start) * 1000,
            )


def create_app(config: ServerConfig) -> Starlette:
    """Loads the newest model version in `config.model_dir` and builds the app.

    Raises:
        FileNotFoundError: if `config.model_dir` holds no complete version folder.
    """
    server = HeadlineServer(config)
    server.app.state.server = server
    return server.app


# ------------------------------------------------------------------------------ CLI


def _positive(kind):
    def parse(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m models.serve",
        description="Serve a headline SavedModel with TensorFlow Serving's REST API.",
    )
    p.add_argument("--model-dir", required=True, help="Folder of version folders.")
    p.add_argument("--model-name", default="headlines")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--max-batch-size", type=_positive(int), default=64)
    p.add_argument("--batch-timeout-ms", type=float, default=5.0)
    p.add_argument("--max-queue", type=_positive(int), default=256)
    p.add_argument("--max-body-bytes", type=_positive(int), default=1_000_000)
    p.add_argument("--max-instances", type=_positive(int), default=64)
    p.add_argument("--request-timeout-s", type=_positive(float), default=30.0)
    p.add_argument(
        "--poll-seconds",
        type=float,
        default=2.0,
        help="How often to look for a newer version; 0 disables the watcher.",
    )
    p.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="'info' logs one line per request.",
    )
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s"
    )
    import uvicorn  # Only the CLI needs it; tests may drive the app in-process.

    config = ServerConfig(
        model_dir=args.model_dir,
        model_name=args.model_name,
        max_batch_size=args.max_batch_size,
        batch_timeout_ms=args.batch_timeout_ms,
        max_queue=args.max_queue,
        max_body_bytes=args.max_body_bytes,
        max_instances=args.max_instances,
        request_timeout_s=args.request_timeout_s,
        poll_seconds=args.poll_seconds,
    )
    try:
        app = create_app(config)
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise SystemExit(f"error: {exc}") from None
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
    )


if __name__ == "__main__":
    main()
