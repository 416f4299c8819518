"""TF Serving's folder layout of exported models: `<model_dir>/<version>/`.

A version is an integer-named folder holding `saved_model.pb`. The exporter
writes into a hidden temporary folder and renames it, so such a folder is
complete. The one place where these rules live: the exporters (SavedModel
and ONNX) write a version through `write_version`, the server watches for
newer ones, the evaluator resolves one.

The standard library only, so that the server imports it without any model code.
"""

import os
import shutil
import tempfile
import time
from pathlib import Path

from models.settings.errors import UserError
from models.settings.folder_layout import SAVED_MODEL_FILE


def version_dirs(model_dir):
    """Complete integer version folders of `model_dir`, oldest first.

    Returns:
        `(version, folder)` pairs; empty when `model_dir` is not a folder.
    """
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        return []
    return sorted(
        (int(child.name), child)
        for child in model_dir.iterdir()
        if child.name.isdigit() and (child / SAVED_MODEL_FILE).is_file()
    )


def next_version(model_dir):
    """1 + the largest integer-named entry of `model_dir` (1 if none).

    Incomplete versions count too, so that no export ever writes into a
    folder that a server or an earlier export may still be using.
    """
    model_dir = Path(model_dir)
    names = [p.name for p in model_dir.iterdir()] if model_dir.is_dir() else []
    return max((int(n) for n in names if n.isdigit()), default=0) + 1


def resolve_version_dir(model_dir):
    """The SavedModel folder for `saved_models/<name>[/<version>]`.

    A folder holding `saved_model.pb` is returned as is; otherwise its newest
    complete version folder.

    Raises:
        UserError: when neither is found.
    """
    path = Path(model_dir)
    if not path.is_dir():
        raise UserError(f"Model folder not found. Received: model_dir={path}")
    if (path / SAVED_MODEL_FILE).is_file():
        return os.fspath(model_dir)
    versions = version_dirs(path)
    if not versions:
        raise UserError(
            f"No SavedModel in `model_dir`: expected {SAVED_MODEL_FILE} there or "
            f"in an integer version folder. Received: model_dir={path}"
        )
    return os.fspath(versions[-1][1])


TMP_PREFIX = ".tmp-export-"
# A temporary folder older than this is a killed export's: no export of a
# model this size takes an hour, so an export still running is never removed.
STALE_TMP_SECONDS = 3600


def remove_stale_temporaries(export_dir, max_age_s=STALE_TMP_SECONDS):
    """Removes `.tmp-export-*` folders older than `max_age_s` (a `kill -9`
    mid-export skips the cleanup); returns the paths removed."""
    now = time.time()
    stale = [
        p
        for p in Path(export_dir).glob(TMP_PREFIX + "*")
        if p.is_dir() and now - p.stat().st_mtime > max_age_s
    ]
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


def write_version(export_dir, write, files, version=None):
    """Writes `<export_dir>/<version>/` atomically and returns its path.

    Args:
        export_dir: The model's folder.
        write: Called with the temporary folder; writes the model there.
        files: dict of file name to text (written) or to a `Path` (copied),
            beside the model.
        version: Integer version; the next free one by default.
    """
    export_dir = Path(export_dir)
    export_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(export_dir)
    version = version or next_version(export_dir)
    final = export_dir / str(version)
    if final.exists():
        raise FileExistsError(
            f"`version` must be a new version folder. Received: version={version} "
            f"({final} exists)"
        )
    # A hidden temporary folder in the same directory: TF Serving ignores
    # names that are not integers, and the rename is atomic on one filesystem.
    tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=export_dir))
    try:
        write(tmp)
        for name, content in files.items():
            if isinstance(content, Path):
                shutil.copy2(content, tmp / name)
            else:
                (tmp / name).write_text(content, encoding="utf-8")
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
