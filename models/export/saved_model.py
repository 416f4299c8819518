"""Writes a trained summarizer as a SavedModel that turns text into headlines.

Apart from training: it takes a built `HeadlineSummarizer` and its
`TextFeatures`, and writes TensorFlow Serving's layout,
`<export_dir>/<version>/`, atomically (a temporary folder, then a rename), so
a crash never leaves a half-written version for a server to pick up. A
failure removes the temporary folder; one left by a kill is removed by a
later export once it is an hour old. The graph and its signatures are
`models.decoding.headline_module.HeadlineModule`'s.

    python -m models.export --run-dir runs/headlines \
        --export-dir saved_models/headlines

exports a finished run again with today's code. TensorFlow and the model code
are imported when an export runs, not with this module, so that the command
line hides TensorFlow's start-up lines (`models.settings.startup`).
"""

import dataclasses
import json
from pathlib import Path

from models.settings.errors import UserError
from models.settings.flags import (
    FLAG,
    SettingsParser,
    add_config_flags,
    given,
    parse_settings,
)
from models.settings.folder_layout import (
    CONFIG_FILE,
    SEARCH_OPTIONS_FILE,
    SEARCH_TUNING_FILE,
)
from models.settings.search import SearchOptions
from models.settings.startup import import_tensorflow, verbose_field
from models.settings.version_folders import write_version


def export(
    model, features, export_dir, *, options=None, version=None, extra_files=None
):
    """Writes `<export_dir>/<version>/` atomically and returns its path.

    Args:
        model: A built `HeadlineSummarizer` or `SummarizerEnsemble`.
        features: Its `TextFeatures`.
        export_dir: The model's folder, e.g. `saved_models/headlines`.
        options: `SearchOptions`.
        version: Integer version; the next free one by default.
        extra_files: dict of file name to text (written) or to a `Path`
            (copied), beside the SavedModel: the model config, say.
    """
    import tensorflow as tf

    from models.decoding.headline_module import HeadlineModule

    options = options or SearchOptions()
    module = HeadlineModule(model, features, options, frozen=True)
    signatures = module.signatures()
    files = {SEARCH_OPTIONS_FILE: json.dumps(dataclasses.asdict(options), indent=2)}
    files.update(extra_files or {})
    return write_version(
        export_dir,
        lambda tmp: tf.saved_model.save(module, str(tmp), signatures=signatures),
        files,
        version,
    )


def export_run(
    run_dir,
    export_dir,
    options=None,
    dtype_policy=None,
    members=None,
    format="saved_model",
):
    """Exports the trained model of a run folder again, with today's code.

    What a new version of this package needs to serve a model trained with
    an older one (a faster search, say), without retraining. The decoding
    settings are `options`, else those tuned on validation by the run
    (`search_tuning.json`), else an export's (`search_options.json`: a
    version folder exported again), else the defaults. `dtype_policy`: compute in
    this Keras dtype policy (`"mixed_bfloat16"`, an opt-in speed lever).
    `members`: of an ensemble's run, export only the first `members` (1: the
    first member alone, to compare with the ensemble). `format`:
    `"saved_model"` (text in, headlines out) or `"onnx"` (the ids-level
    search, `models.export.onnx_model`, with the config and vocabulary).
    """
    from models.model.run_folder import export_files, load_run, load_trained_model

    run_dir = Path(run_dir)
    options = options or run_search_options(run_dir)
    _, features = load_run(run_dir)
    model = load_trained_model(run_dir, dtype_policy, members)
    files = export_files(run_dir, members)
    if format == "onnx":
        from models.export.onnx_model import export_onnx

        return export_onnx(
            model,
            features,
            export_dir,
            options=options,
            extra_files={CONFIG_FILE: files[CONFIG_FILE]},
        )
    return export(model, features, export_dir, options=options, extra_files=files)


@dataclasses.dataclass
class ExportSettings:
    """The settings of `python -m models.export`, one flag each.

    Attributes:
        run_dir: runs/<name> of a finished run.
        export_dir: saved_models/<name>; the export is its next version.
        search_options: A search_options.json (default: the run's tuned
            settings, else those of the export folder given as the run).
        dtype_policy: Opt-in, approximate: compute in bfloat16 (fast on CPUs
            with AVX512-BF16 or AMX).
        members: Of an ensemble's run, export only the first N members (1:
            the first member alone; default: all).
        format: `saved_model` (text to headlines) or `onnx` (the ids-level
            beam search, for ONNX Runtime: `models.export.onnx_model`).
        search_overrides: The `SearchOptions` fields given as flags, which
            override `search_options` or the run's tuned settings.
    """

    run_dir: str
    export_dir: str
    search_options: str | None = None
    dtype_policy: str | None = dataclasses.field(
        default=None, metadata={"choices": ("mixed_bfloat16",)}
    )
    members: int | None = dataclasses.field(default=None, metadata={"metavar": "N"})
    format: str = dataclasses.field(
        default="saved_model", metadata={"choices": ("saved_model", "onnx")}
    )
    search_overrides: dict = dataclasses.field(
        default_factory=dict, metadata={FLAG: False}
    )
    verbose: bool = verbose_field()


def argument_parser():
    """The parser of the command line: one flag per settings field."""
    p = SettingsParser(
        prog="python -m models.export",
        description="Export a trained run again as the next SavedModel version.",
    )
    add_config_flags(p, ExportSettings)
    add_config_flags(
        p.add_argument_group(
            "decoding (each given flag overrides --search-options or the run's "
            "tuned settings)"
        ),
        SearchOptions,
        unset=True,
    )
    return p


def parse_export_settings(argv=None):
    """`ExportSettings` from the command line's arguments (`sys.argv[1:]`)."""
    return parse_settings(
        argument_parser(),
        ExportSettings,
        argv,
        extra=lambda args: {"search_overrides": given(args, SearchOptions)},
    )


def run_search_options(run_dir):
    """The search a run folder chose on validation, else the one an export's
    version folder serves, else the defaults: a `SearchOptions`."""
    served = Path(run_dir) / SEARCH_OPTIONS_FILE
    if (Path(run_dir) / SEARCH_TUNING_FILE).exists() or not served.is_file():
        return SearchOptions.tuned(run_dir)
    return _search_options(served, run_dir)


def _search_options(path, run_dir):
    """The options of a `search_options.json`, else `run_search_options`."""
    if not path:
        return run_search_options(run_dir)
    try:
        return SearchOptions(**json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError) as error:
        raise UserError(
            "`search_options` must be a readable JSON file of SearchOptions "
            f"fields ({error}). Received: search_options={str(path)!r}"
        ) from None


def main(argv=None):
    settings = parse_export_settings(argv)
    import_tensorflow(settings.verbose)
    import keras

    if keras.backend.backend() != "tensorflow":
        raise SystemExit(
            "error: `KERAS_BACKEND` must be tensorflow to export. "
            f"Received: KERAS_BACKEND={keras.backend.backend()}"
        )
    try:
        options = _search_options(settings.search_options, settings.run_dir)
        options = dataclasses.replace(options, **settings.search_overrides)
        path = export_run(
            settings.run_dir,
            settings.export_dir,
            options,
            settings.dtype_policy,
            settings.members,
            settings.format,
        )
    except UserError as error:
        raise SystemExit(f"error: {error}") from None
    print(f"Exported {path}")
