"""The one error type for mistakes a user can fix, and its HTTP form.

A `UserError` is answered in one line, without a traceback, by every command
line (`train.py`, `python -m models.evaluate`, `python -m models.serve`) and as
`{"error": message}` by the server. Messages follow Keras' style: what was
expected, then "Received: x=..." with the value given.

Plain Python only: the server imports it without any model code.
"""


class UserError(ValueError):
    """A bad flag, argument, file or request; the message is one line."""


class HttpError(UserError):
    """A `UserError` answered by the server with an HTTP `status`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class LostWorker(UserError):
    """A worker of a multi-worker cluster died or stopped answering."""
