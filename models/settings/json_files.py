"""The JSON files a run or an export writes, written whole or not at all.

The records of a run folder and of an export (the schedule, a member's
end, the callbacks' state beside a backup, the minimum-risk stage's state,
the run's config, options and lengths, its data source, a teacher's cached
headlines, `training.json`) go through `write_json` or
`write_whole`: a kill or a full disk midway leaves the previous file,
never half of a new one, so that a resumed run reads what it last wrote.
"""

import json
import os
import tempfile
from pathlib import Path


def write_json(path, value, indent=2):
    """Writes `value` as JSON to `path`, atomically.

    The text goes to a temporary file in the same folder (so that the
    rename stays on one file system), is flushed to the disk, then takes
    `path`'s name with `os.replace`. The folder is created if missing.

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
    """Writes the string `text` to `path`, atomically, as `write_json` does
    (a teacher's cached headlines and a run's vocabulary are text, not
    JSON)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
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
