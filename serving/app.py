"""The Starlette app: TF Serving's REST routes, the web page and monitoring."""

import asyncio
import contextlib
import json
import logging
import queue
import re
import time
from collections import Counter
from pathlib import Path

import tensorflow as tf
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from models.settings.errors import HttpError, first_line
from serving.batcher import Batcher, Job
from serving.codec import (
    DEFAULT_SIGNATURE,
    LENGTH_FIELDS,
    LENGTH_SIGNATURE,
    crop_batch_padding,
    parse_columnar,
    parse_lengths,
    parse_row,
    preview,
    to_json,
)
from serving.servable import ModelManager

logger = logging.getLogger("serving")

STATIC_DIR = Path(__file__).resolve().parent / "static"
# The beam-search signatures whose outputs `length_control` also gives: a
# request to one of them with length fields is answered by it.
_LENGTH_CONTROLLED = (DEFAULT_SIGNATURE, "attention")


# ------------------------------------------------------------------------- the app


_MODEL_PATH = re.compile(
    r"^(?P<name>[^/:]+)"
    r"(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"
    r"(?P<tail>/metadata|:[A-Za-z]+)?$"
)


def _json_response(payload, status=200, headers=None):
    body = json.dumps(payload, ensure_ascii=False, allow_nan=False)
    return Response(body, status, headers=headers, media_type="application/json")


def _error(status, message):
    return _json_response({"error": message}, status)


class HeadlineServer:
    """The Starlette app plus the model manager and batcher it owns."""

    def __init__(self, config):
        self.config = config
        self.manager = ModelManager(config.model_dir, config.poll_seconds)
        self.batcher = Batcher(
            config.max_batch_size, config.batch_timeout_ms / 1000.0, config.max_queue
        )
        self.requests = 0
        self.errors = Counter()
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
            exception_handlers={HttpError: self._http_error},
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

    async def _http_error(self, request, exc):
        """Answers every `HttpError` a route raises as `{"error": message}`."""
        self.errors[exc.status] += 1
        return _error(exc.status, exc.message)

    # ---- routes

    async def index(self, request):
        return FileResponse(
            STATIC_DIR / "index.html",
            headers={
                # The page uses only its own script and style: nothing else runs.
                "Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
                "Cache-Control": "no-cache",
            },
        )

    async def stats(self, request):
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

    async def models(self, request):
        match = _MODEL_PATH.match(request.path_params["rest"])
        if not match:
            raise HttpError(
                404,
                f"Unknown path: not a TF Serving route. Received: {request.url.path}",
            )
        name, version, label, tail = match.group("name", "version", "label", "tail")
        if label is not None:
            raise HttpError(
                404,
                "Labels are not supported: name a version or none. "
                f"Received: label='{label}'",
            )
        is_post = request.method == "POST"
        if tail in (None, "/metadata"):
            if is_post:
                raise HttpError(
                    405, f"{request.url.path} must be read with GET. Received: POST"
                )
            servable = self._servable(name, version)
            if tail is None:
                return _json_response(self._status(servable))
            return _json_response(self._metadata(servable))
        if tail in (":classify", ":regress"):
            raise HttpError(
                400,
                "The method must be predict (classify and regress are not "
                f"supported). Received: {tail[1:]}",
            )
        if tail != ":predict":
            raise HttpError(
                404, f"Unknown method: it must be predict. Received: {tail[1:]}"
            )
        if not is_post:
            raise HttpError(
                405,
                f"{request.url.path} must be sent with POST. "
                f"Received: {request.method}",
            )
        servable = self._servable(name, version)
        payload = await self._read_json(request)
        return await self._predict(servable, payload)

    async def api_headline(self, request):
        """Endpoint for the web page: one document -> tokens + attention matrix."""
        payload = await self._read_json(request)
        if (
            not isinstance(payload, dict)
            or "document" not in payload
            or not set(payload) <= {"document", *LENGTH_FIELDS}
        ):
            raise HttpError(
                400,
                'The body must be a JSON object {"document": "..."}, optionally '
                f"with {', '.join(LENGTH_FIELDS)}. Received: {preview(payload)}",
            )
        document = payload["document"]
        if not isinstance(document, str) or not document.strip():
            raise HttpError(
                400,
                f"`document` must be a non-empty string. Received: {preview(document)}",
            )
        servable = self.manager.current
        signature = "attention"
        if signature not in servable.signatures:
            signature = DEFAULT_SIGNATURE
        signature, params = self._length_params(
            servable, signature, parse_lengths(payload)
        )
        dtypes = servable.input_dtypes[signature]
        if len(dtypes) != 1:
            raise HttpError(
                400,
                f"Signature '{signature}' must take a single input. "
                f"Received: inputs {sorted(dtypes)}",
            )
        inputs = {next(iter(dtypes)): [document.encode("utf-8")]}
        outputs, batch_requests, batch_size = await self._call(
            servable, signature, inputs, 1, params
        )
        outputs = crop_batch_padding(outputs)
        first = {k: to_json(v[0] if v.ndim else v) for k, v in outputs.items()}
        return _json_response(
            {
                "model_name": self.config.model_name,
                "model_version": str(servable.version),
                "headline": first.get("headlines"),
                "score": first.get("scores"),
                "source_tokens": first.get("source_tokens", []),
                "headline_tokens": first.get("headline_tokens", []),
                # The heatmap's labels: the words as the reader sees them.
                "source_words": first.get("source_words", []),
                "headline_words": first.get("headline_words", []),
                "attention": first.get("attention", []),
                "validation_check": servable.validation_check,
            },
            headers=_batch_headers(batch_requests, batch_size),
        )

    # ---- helpers

    def _servable(self, name, version):
        servable = self.manager.current  # Read once: stable for this request.
        if name != self.config.model_name:
            spec = f"Specific({name}, {version})" if version else f"Latest({name})"
            raise HttpError(404, f"Servable not found for request: {spec}")
        if version is not None and version != str(servable.version):
            raise HttpError(
                404,
                f"Servable not found for request: Specific({name}, {version}) "
                f"(serving version {servable.version})",
            )
        return servable

    def _status(self, servable):
        return {
            "model_version_status": [
                {
                    "version": str(servable.version),
                    "state": "AVAILABLE",
                    "status": {"error_code": "OK", "error_message": ""},
                }
            ]
        }

    def _metadata(self, servable):
        metadata = {"signature_def": {"signature_def": servable.signature_defs}}
        if servable.validation_check is not None:
            # Beside TF Serving's own entry: whether the model beats the
            # lead baseline on validation (`training.json`).
            metadata["validation_check"] = servable.validation_check
        return {
            "model_spec": {
                "name": self.config.model_name,
                "signature_name": "",
                "version": str(servable.version),
            },
            "metadata": metadata,
        }

    async def _read_json(self, request):
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise HttpError(
                413,
                f"The request body exceeds the limit of {limit} bytes. "
                f"Received: {declared} bytes",
            )
        chunks, size = [], 0
        async for chunk in request.stream():  # Also bounds chunked uploads.
            size += len(chunk)
            if size > limit:
                raise HttpError(
                    413,
                    f"The request body exceeds the limit of {limit} bytes. "
                    f"Received: more than {limit} bytes",
                )
            chunks.append(chunk)
        body = b"".join(chunks)
        if not body.strip():
            raise HttpError(
                400, "The request body must be a JSON object. Received: an empty body"
            )
        try:  # Decode first: json.loads(bytes) would guess UTF-16/32 too.
            return json.loads(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise HttpError(
                400, f"The request body must be UTF-8 text. Received: {exc}"
            ) from None
        except json.JSONDecodeError as exc:
            raise HttpError(
                400, f"The request body must be valid JSON. Received: {exc}"
            ) from None

    async def _predict(self, servable, payload):
        if not isinstance(payload, dict):
            raise HttpError(
                400,
                "A predict request must be a JSON object with 'instances' or "
                f"'inputs'. Received: {type(payload).__name__}",
            )
        known = {"signature_name", "instances", "inputs", *LENGTH_FIELDS}
        unknown = sorted(set(payload) - known)
        if unknown:
            raise HttpError(
                400,
                "A predict request has 'instances' (row format) or 'inputs' "
                "(columnar format), and optionally 'signature_name', "
                f"{', '.join(map(repr, LENGTH_FIELDS))}. "
                f"Received: unknown field(s) {unknown}",
            )
        if ("instances" in payload) == ("inputs" in payload):
            raise HttpError(
                400,
                "Missing 'inputs' or 'instances' key"
                if "instances" not in payload
                else "A predict request must have 'instances' or 'inputs', not "
                "both. Received: both",
            )
        signature = payload.get("signature_name", DEFAULT_SIGNATURE)
        if not isinstance(signature, str):
            raise HttpError(
                400,
                "`signature_name` must be a string. "
                f"Received: signature_name={preview(signature)}",
            )
        signature = signature or DEFAULT_SIGNATURE
        if signature not in servable.signatures:
            raise HttpError(
                400,
                f'Serving signature name: "{signature}" not found in signature def '
                f"(available: {sorted(servable.signatures)})",
            )
        run_signature, params = self._length_params(
            servable, signature, parse_lengths(payload)
        )
        dtypes = servable.input_dtypes[run_signature]
        row = "instances" in payload
        if row:
            inputs, size = parse_row(payload["instances"], dtypes)
        else:
            inputs, size = parse_columnar(payload["inputs"], dtypes)
        if size > self.config.max_instances:
            raise HttpError(
                400,
                f"A request must hold at most {self.config.max_instances} "
                f"instances. Received: {size} instances",
            )
        outputs, batch_requests, batch_size = await self._call(
            servable, run_signature, inputs, size, params
        )
        outputs = crop_batch_padding(outputs)
        names = servable.output_names[signature]
        headers = _batch_headers(batch_requests, batch_size)
        if row:
            columns = {k: to_json(outputs[k]) for k in names}
            if len(names) == 1:
                predictions = columns[names[0]]
            else:
                predictions = [{k: columns[k][i] for k in names} for i in range(size)]
            return _json_response({"predictions": predictions}, headers=headers)
        if len(names) == 1:
            return _json_response(
                {"outputs": to_json(outputs[names[0]])}, headers=headers
            )
        return _json_response(
            {"outputs": {k: to_json(outputs[k]) for k in names}}, headers=headers
        )

    def _length_params(self, servable, signature, lengths):
        """The signature to run and its scalar inputs, defaults filled in.

        Length fields on a request to `serving_default` or `attention` run
        `length_control`, which gives their outputs too. Its defaults, which a
        signature cannot hold, are the export's `search_options.json`.
        """
        if lengths and not servable.param_dtypes[signature]:
            given = ", ".join(f"{k}={v}" for k, v in lengths.items())
            if signature not in _LENGTH_CONTROLLED:
                raise HttpError(
                    400,
                    f"{', '.join(LENGTH_FIELDS)} apply to beam search: the "
                    f"signature must be one of {list(_LENGTH_CONTROLLED)}. "
                    f"Received: signature_name={signature}, {given}",
                )
            if LENGTH_SIGNATURE not in servable.signatures:
                raise HttpError(
                    400,
                    f"Model version {servable.version} takes no length settings "
                    f"(no '{LENGTH_SIGNATURE}' signature; export it again). "
                    f"Received: {given}",
                )
            signature = LENGTH_SIGNATURE
        params = {}
        defaults = servable.search_options
        for name in servable.param_dtypes[signature]:
            if name not in lengths and name not in defaults:
                raise HttpError(
                    400,
                    f"`{name}` must be given: model version {servable.version} "
                    f"has no default for it. Received: none",
                )
            params[name] = lengths.get(name, defaults.get(name))
        # The graph clips lengths to the export's `max_length`; clipping here
        # too keeps them in int32 and lets equal settings share a batch.
        limit = defaults.get("max_length")
        for name in ("min_length", "max_length"):
            if name in params and limit is not None:
                params[name] = min(params[name], limit)
        return signature, params

    async def _call(self, servable, signature, inputs, size, params=None):
        self.requests += 1
        job = Job(servable, signature, inputs, size, params or {})
        try:
            self.batcher.submit(job)
        except queue.Full:
            raise HttpError(
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
            raise HttpError(
                504,
                f"Request timed out after {self.config.request_timeout_s:g} s.",
            ) from None
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as exc:
            raise HttpError(400, first_line(exc)) from None
        except Exception as exc:
            logger.exception("Model call failed")
            raise HttpError(500, f"Model call failed: {first_line(exc)}") from None


def _batch_headers(batch_requests, batch_size):
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


def create_app(config):
    """Loads the newest model version in `config.model_dir` and builds the app.

    Args:
        config: A `ServerConfig` (or the command line's `ServeSettings`).

    Raises:
        FileNotFoundError: if `config.model_dir` holds no complete version folder.
    """
    server = HeadlineServer(config)
    server.app.state.server = server
    return server.app
