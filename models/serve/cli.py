"""Command line of the server: `python -m models.serve --model-dir ... --port ...`."""

import argparse
import dataclasses
import logging

from models.startup import add_verbose_flag, import_tensorflow


def _positive(kind):
    def parse(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0. Received: {text}")
        return value

    return parse


def _non_negative(text):
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0. Received: {text}")
    return value


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m models.serve",
        description="Serve a headline SavedModel with TensorFlow Serving's REST API.",
    )
    p.add_argument("--model-dir", required=True, help="Folder of version folders.")
    p.add_argument("--model-name", default="headlines")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--max-batch-size", type=_positive(int), default=64)
    p.add_argument("--batch-timeout-ms", type=_non_negative, default=5.0)
    p.add_argument("--max-queue", type=_positive(int), default=256)
    p.add_argument("--max-body-bytes", type=_positive(int), default=1_000_000)
    p.add_argument("--max-instances", type=_positive(int), default=64)
    p.add_argument("--request-timeout-s", type=_positive(float), default=30.0)
    p.add_argument(
        "--poll-seconds",
        type=_non_negative,
        default=2.0,
        help="How often to look for a newer version; 0 disables the watcher.",
    )
    p.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="'info' logs one line per request.",
    )
    add_verbose_flag(p)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s"
    )
    import uvicorn  # Only the CLI needs it; tests may drive the app in-process.

    import_tensorflow(args.verbose)
    # After TensorFlow, so that its start-up lines stay hidden.
    from models.serve.app import ServerConfig, create_app

    config = ServerConfig(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(ServerConfig)}
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
