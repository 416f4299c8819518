"""The files a run or an export writes and a later run reads back, written
whole or not at all.

The records of a run folder and of an export (the schedule, a member's
end, the callbacks' state beside a backup, the minimum-risk stage's state,
the run's config, options and lengths, its data source, the search's
tuning, `training.json`, `metrics.json`), a run's vocabulary, a teacher's
cached headlines, a member's model and the offline dataset's marker go
through `write_json`, `write_whole` or `whole_file`: a kill or a full disk
midway leaves the previous file, never half of a new one, so that a resumed
run reads what it last wrote.
"""

import contextlib
import json
import os
from pathlib import Path


def write_json(path, value, indent=2):
    """Writes `value` as JSON to `path`, atomically (`whole_file`).

    Args:
        path: The file written.
        value: Anything `json.dumps` takes.
        indent: `json.dumps`' indent (None: one line).

    Example:

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> write_json(f"{folder}/state.json", {"step": 3})
    >>> read_json(f"{folder}/state.json")
    {'step': 3}
    """
    write_whole(path, json.dumps(value, indent=indent) + "\n")


def write_whole(path, text):
    """Writes the string `text` to `path` (UTF-8), atomically, as `write_json`
    does (a teacher's cached headlines and a run's vocabulary are text, not
    JSON)."""
    with whole_file(path) as partial:
        with open(partial, "x", encoding="utf-8") as file:
            file.write(text)


@contextlib.contextmanager
def whole_file(path):
    """A temporary path beside `path`, which takes `path`'s name once the
    block has written it and ended without an error.

    The temporary file is in the same folder (so that the rename stays on one
    file system) and keeps `path`'s suffix (`np.save` and Keras' `model.save`
    read it); it is flushed to the disk, then renamed with `os.replace`. An
    error or an interrupt in the block removes it and leaves `path` as it
    was. The folder is created if missing; the file gets the permissions any
    new file gets (the umask's).

    Example:

    >>> import tempfile
    >>> import numpy as np
    >>> path = f"{tempfile.mkdtemp()}/lengths.npy"
    >>> with whole_file(path) as partial:
    ...     np.save(partial, np.arange(3))
    >>> np.load(path)
    array([0, 1, 2])
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.stem}.{os.urandom(4).hex()}{path.suffix}")
    try:
        yield partial
        descriptor = os.open(partial, os.O_RDWR)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def read_json(path, default=None):
    """The JSON value in `path`, or `default` when there is no such file.

    Example:

    >>> read_json("/no/such/file.json", default={})
    {}
    """
    path = Path(path)
    if not path.is_file():
        return default
    return json.loads(path.read_text(encoding="utf-8"))
