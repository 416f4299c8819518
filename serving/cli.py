"""Command line of the server: `python -m serving --model-dir ... --port ...`."""

import logging

from models.settings.flags import SettingsParser, add_config_flags, parse_settings
from models.settings.startup import import_tensorflow
from serving.settings import ServeSettings


def argument_parser():
    """The parser of `python -m serving`: one flag per `ServeSettings` field."""
    parser = SettingsParser(
        prog="python -m serving",
        description="Serve a headline SavedModel with TensorFlow Serving's REST API.",
    )
    add_config_flags(parser, ServeSettings)
    return parser


def parse_serve_settings(argv=None):
    """`ServeSettings` from the command line's arguments (`sys.argv[1:]`)."""
    return parse_settings(argument_parser(), ServeSettings, argv)


def main(argv=None):
    settings = parse_serve_settings(argv)
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(message)s",
    )
    import uvicorn  # Only the CLI needs it; tests may drive the app in-process.

    import_tensorflow(settings.verbose)
    # After TensorFlow, so that its start-up lines stay hidden.
    from serving.app import create_app

    try:
        app = create_app(settings)
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise SystemExit(f"error: {exc}") from None
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
    )
