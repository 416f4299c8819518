"""Loaded SavedModel versions and the manager that hot-swaps to newer ones."""

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tensorflow as tf
from google.protobuf import json_format

from models.decoding.saved_model_client import load_saved_model, signature_defs
from models.settings.errors import UserError
from models.settings.folder_layout import (
    SAVED_MODEL_FILE,
    SEARCH_OPTIONS_FILE,
    TRAINING_RECORD_FILE,
)
from models.settings.version_folders import version_dirs

logger = logging.getLogger("serving")


def _rendered_signature_defs(path):
    """`SignatureDef`s of a SavedModel rendered as TF Serving renders them."""
    defs = {}
    for name, sig in signature_defs(path).items():
        try:
            rendered = json_format.MessageToDict(
                sig,
                preserving_proto_field_name=True,
                always_print_fields_with_no_presence=True,
            )
        except TypeError:  # protobuf < 5.26 spells the option differently.
            rendered = json_format.MessageToDict(
                sig,
                preserving_proto_field_name=True,
                including_default_value_fields=True,
            )
        defs[name] = rendered
    return defs


def _folder_state(path):
    """Each file of a version folder with its size and modification time."""
    files = sorted(p for p in path.rglob("*") if p.is_file())
    return tuple(
        (str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in files
    )


def _validation_check(path):
    """The export's comparison with the lead baseline, else None."""
    record_path = path / TRAINING_RECORD_FILE
    if not record_path.is_file():
        return None
    try:
        return json.loads(record_path.read_text()).get("validation_check")
    except (OSError, ValueError, AttributeError):
        return None


@dataclass
class Servable:
    """One loaded version of the model and what is known about its signatures."""

    version: int
    path: Path
    loaded: Any
    signatures: dict[str, Any]
    # signature -> input name -> tf.DType, and signature -> output names.
    # `input_dtypes` holds the batched inputs, `param_dtypes` the scalar ones
    # (the length settings), which a request gives once for all its rows.
    input_dtypes: dict[str, dict[str, tf.DType]]
    output_names: dict[str, list[str]]
    signature_defs: dict[str, Any]
    param_dtypes: dict[str, dict[str, tf.DType]]
    # The export's `search_options.json`: the defaults of the scalar inputs.
    search_options: dict[str, Any]
    # How the model compared with the lead baseline on validation (the
    # export's `training.json`, `models.decoding.lead_check`); None if not recorded.
    validation_check: dict[str, Any] | None = None

    @classmethod
    def load(cls, version, path):
        loaded = load_saved_model(path)
        signatures = dict(loaded.signatures)
        if not signatures:
            raise UserError(
                f"A SavedModel must have signatures. Received: none in {path}"
            )
        input_dtypes, param_dtypes, output_names = {}, {}, {}
        for name, fn in signatures.items():
            _, kwargs = fn.structured_input_signature
            input_dtypes[name] = {
                k: spec.dtype for k, spec in kwargs.items() if spec.shape.rank != 0
            }
            param_dtypes[name] = {
                k: spec.dtype for k, spec in kwargs.items() if spec.shape.rank == 0
            }
            output_names[name] = sorted(fn.structured_outputs)
        options_path = path / SEARCH_OPTIONS_FILE
        search_options = (
            json.loads(options_path.read_text()) if options_path.exists() else {}
        )
        return cls(
            validation_check=_validation_check(path),
            version=version,
            path=path,
            loaded=loaded,
            signatures=signatures,
            input_dtypes=input_dtypes,
            output_names=output_names,
            signature_defs=_rendered_signature_defs(path),
            param_dtypes=param_dtypes,
            search_options=search_options,
        )

    def run(self, signature, inputs):
        """Calls `signature` on the batched `inputs` and its scalar params."""
        fn = self.signatures[signature]
        dtypes = {**self.input_dtypes[signature], **self.param_dtypes[signature]}
        tensors = {k: tf.constant(v, dtype=dtypes[k]) for k, v in inputs.items()}
        return {k: v.numpy() for k, v in fn(**tensors).items()}

    def warm_up(self):
        """Calls every signature once so the first request pays no first-call cost."""
        for name, dtypes in self.input_dtypes.items():
            params = self.param_dtypes[name]
            if not all(d == tf.string for d in dtypes.values()):
                continue
            if not all(k in self.search_options for k in params):
                continue
            inputs = {k: ["warm up"] for k in dtypes}
            self.run(name, {**inputs, **{k: self.search_options[k] for k in params}})


class ModelManager:
    """Holds the servable in use and swaps in newer versions found on disk.

    Requests capture `current` once when they are accepted and run on that
    servable, so a swap never touches work in flight: the old version is freed
    when the last request holding it finishes.
    """

    def __init__(self, model_dir, poll_seconds=2.0):
        self.model_dir = Path(model_dir)
        self.poll_seconds = poll_seconds
        versions = version_dirs(self.model_dir)
        if not versions:
            raise FileNotFoundError(
                "No version folder in `model_dir`: it must hold <integer version>/"
                f"{SAVED_MODEL_FILE}. Received: model_dir={self.model_dir}"
            )
        version, path = versions[-1]
        servable = Servable.load(version, path)
        servable.warm_up()
        self.current = servable
        # version -> `_folder_state` of its folder when it failed to load.
        self._failed = {}
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        if self.poll_seconds > 0 and self._thread is None:
            self._thread = threading.Thread(
                target=self._watch, name="model-watcher", daemon=True
            )
            self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def poll_once(self):
        """Loads the newest version if it is newer than the one served.

        Returns:
            Whether a new version was switched to.
        """
        newer = [
            (v, p) for v, p in version_dirs(self.model_dir) if v > self.current.version
        ]
        # A version that failed is tried again only once its files change:
        # a folder copied in place (not renamed in) fails while half-written.
        for version, path in reversed(newer):
            state = _folder_state(path)
            if self._failed.get(version) != state:
                break
        else:
            return False
        try:
            servable = Servable.load(version, path)
            servable.warm_up()
        except Exception as exc:  # Keep serving the old version.
            self._failed[version] = state
            logger.error("Could not load version %d from %s: %s", version, path, exc)
            return False
        old = self.current.version
        self.current = servable  # One reference assignment: atomic for readers.
        logger.warning("Switched model from version %d to version %d", old, version)
        return True

    def _watch(self):
        while not self._stop.wait(self.poll_seconds):
            try:
                self.poll_once()
            except Exception:  # The watcher must outlive odd file-system states.
                logger.exception("Model watcher failed; retrying")
