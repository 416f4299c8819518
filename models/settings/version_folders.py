"""TF Serving's folder layout of exported models: `<model_dir>/<version>/`.

A version is an integer-named folder holding `saved_model.pb`. The exporter
writes into a hidden temporary folder and renames it, so such a folder is
complete. The one place where these rules live: the exporter picks the next
version, the server watches for newer ones, the evaluator resolves one.

Plain `pathlib` only, so that the server imports it without any model code.
"""

import os
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
