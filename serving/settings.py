"""The settings of a server and of its command line, one flag per field.

Plain dataclasses with no TensorFlow import, so that `python -m serving`
parses its flags (`models.settings.flags`) before TensorFlow loads.
"""

import dataclasses

from models.settings.flags import non_negative, positive
from models.settings.startup import verbose_field

LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclasses.dataclass
class ServerConfig:
    """Settings of one server (`create_app`).

    Attributes:
        model_dir: Folder of integer version folders, e.g.
            saved_models/headlines; the newest complete one is served.
        model_name: The model's name in the REST paths,
            /v1/models/<name>[:predict|/metadata].
        max_batch_size: Most documents in one call of a signature; requests
            that arrive together are merged up to it.
        batch_timeout_ms: How long the first request of a batch waits for
            others to join it.
        max_queue: Most requests waiting for a call; one more is answered
            503 (overloaded).
        max_body_bytes: Largest request body; a larger one is answered 413.
        max_instances: Most documents in one request; more are answered 400.
        request_timeout_s: Longest a request waits for its answer; then it
            is answered 504.
        poll_seconds: How often to look for a newer version; 0 disables the
            watcher.
    """

    model_dir: str
    model_name: str = "headlines"
    max_batch_size: int = dataclasses.field(
        default=64, metadata={"type": positive(int)}
    )
    batch_timeout_ms: float = dataclasses.field(
        default=5.0, metadata={"type": non_negative}
    )
    max_queue: int = dataclasses.field(default=256, metadata={"type": positive(int)})
    max_body_bytes: int = dataclasses.field(
        default=1_000_000, metadata={"type": positive(int)}
    )
    max_instances: int = dataclasses.field(default=64, metadata={"type": positive(int)})
    request_timeout_s: float = dataclasses.field(
        default=30.0, metadata={"type": positive(float)}
    )
    poll_seconds: float = dataclasses.field(
        default=2.0, metadata={"type": non_negative}
    )


@dataclasses.dataclass
class ServeSettings(ServerConfig):
    """The settings of `python -m serving`: the server's and its process's.

    Attributes:
        host: Address to listen on.
        port: Port to listen on.
        log_level: Logging level, one of `LOG_LEVELS`; 'info' logs one line
            per request.
    """

    host: str = "127.0.0.1"
    port: int = 8501
    log_level: str = dataclasses.field(
        default="warning", metadata={"choices": LOG_LEVELS}
    )
    verbose: bool = verbose_field()
