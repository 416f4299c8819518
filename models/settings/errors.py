"""The errors of the command lines and the server, and how each is told.

A `UserError` is a mistake the user can fix (a bad flag, argument, file or
request). Every command line (`train.py`, `python -m models.evaluation`,
`python -m serving`) answers it in one line, without a traceback.
Messages follow Keras' style: what was expected, then "Received: x=..." with
the value given.

An `HttpError` is the server's answer, with its status: a 4xx for a bad
request, a 5xx for a failure of the server itself (an overloaded queue, a
timeout, a model call that failed). A `LostWorker` is neither: a peer of a
multi-worker run died, and rerunning resumes.

Plain Python only: the server imports it without any model code.
"""

import re

# What TensorFlow puts before the cause in an error raised in a graph.
_GRAPH_ERROR_HEADERS = ("Graph execution error", "Detected at node")


class UserError(ValueError):
    """A bad flag, argument, file or request; the message is one line."""


def check_at_least(record, bounds):
    """Raises a `UserError` for the first field of `record` below its bound.

    Args:
        record: a settings dataclass.
        bounds: `(field name, least value)` pairs, checked in order.

    Example:

    >>> import types
    >>> try:
    ...     check_at_least(types.SimpleNamespace(beam_size=0), [("beam_size", 1)])
    ... except UserError as error:
    ...     print(error)
    `beam_size` must be >= 1. Received: beam_size=0
    """
    for name, least in bounds:
        value = getattr(record, name)
        if value < least:
            raise UserError(f"`{name}` must be >= {least}. Received: {name}={value}")


class HttpError(Exception):
    """An error the server answers with HTTP `status` and `{"error": message}`."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


class LostWorker(RuntimeError):
    """A worker of a multi-worker cluster died or stopped answering."""


def first_line(error):
    """The line of `error`'s message that says what went wrong.

    An error raised in a TensorFlow graph starts with a header and the
    (indented) traceback of the op, and marks nodes with `{{...}}`: the
    cause is the first line that is none of those. An empty message gives
    the error's type name.
    """
    message = getattr(error, "message", None) or str(error)
    lines = re.sub(r"\{\{.*?\}\}\s*", "", message).splitlines()
    causes = (
        line
        for line in lines
        if line[:1].strip() and not line.startswith(_GRAPH_ERROR_HEADERS)
    )
    return next(causes, None) or next(
        iter(message.strip().splitlines()), type(error).__name__
    )
