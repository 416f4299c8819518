"""Writes a trained summarizer as a SavedModel that turns text into headlines.

Apart from training: it takes a built `HeadlineSummarizer` and its
`TextFeatures`, and writes TensorFlow Serving's layout,
`<export_dir>/<version>/`, atomically (a temporary folder, then a rename), so
a crash never leaves a half-written version for a server to pick up. A
failure removes the temporary folder; one left by a kill is removed by a
later export once it is an hour old. The graph and its signatures are
`models.inference.HeadlineModule`'s.
"""

import dataclasses
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import tensorflow as tf

from models.config import SearchOptions
from models.inference import HeadlineModule
from models.layout import next_version
from models.runs import load_run, load_trained_model, model_files

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
    options = options or SearchOptions()
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
    module = HeadlineModule(model, features, options, frozen=True)
    signatures = module.signatures()
    # A hidden temporary folder in the same directory: TF Serving ignores
    # names that are not integers, and the rename is atomic on one filesystem.
    tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=export_dir))
    try:
        tf.saved_model.save(module, str(tmp), signatures=signatures)
        files = {
            "search_options.json": json.dumps(dataclasses.asdict(options), indent=2)
        }
        files.update(extra_files or {})
        for name, content in files.items():
            if isinstance(content, Path):
                shutil.copy2(content, tmp / name)
            else:
                (tmp / name).write_text(content)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def export_run(run_dir, export_dir, options=None, dtype_policy=None):
    """Exports the trained model of a run folder again, with today's code.

    What a new version of this package needs to serve a model trained with
    an older one (a faster search, say), without retraining. The decoding
    settings are `options`, else those tuned on validation by the run
    (`search_tuning.json`), else the defaults. `dtype_policy`: compute in
    this Keras dtype policy (`"mixed_bfloat16"`, an opt-in speed lever).
    """
    run_dir = Path(run_dir)
    options = options or SearchOptions.tuned(run_dir)
    _, features = load_run(run_dir)
    model = load_trained_model(run_dir, dtype_policy)
    files = {"config.json": run_dir / "config.json", **model_files(run_dir)}
    return export(model, features, export_dir, options=options, extra_files=files)


def main(argv=None):
    import argparse

    p = argparse.ArgumentParser(
        description="Export a trained run again as the next SavedModel version."
    )
    p.add_argument("--run-dir", required=True, help="runs/<name> of a finished run")
    p.add_argument("--export-dir", required=True, help="saved_models/<name>")
    p.add_argument(
        "--search-options",
        help="a search_options.json (default: the run's tuned settings)",
    )
    p.add_argument(
        "--shortlist",
        type=int,
        metavar="K",
        help="opt-in, approximate: score only the K most frequent words and "
        "the source's words at each step (SearchOptions.shortlist)",
    )
    p.add_argument(
        "--dtype-policy",
        choices=["mixed_bfloat16"],
        help="opt-in, approximate: compute in bfloat16 (fast on CPUs with "
        "AVX512-BF16 or AMX)",
    )
    p.add_argument(
        "--xla",
        action="store_true",
        help="opt-in: compile the encoder and search with XLA (needs "
        "TensorFlow with XLA to serve: pip's, or the project's server)",
    )
    p.add_argument(
        "--shards",
        type=int,
        help="decode a batch as this many searches at the same time "
        "(SearchOptions.shards)",
    )
    args = p.parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    if args.search_options:
        options = SearchOptions(**json.loads(Path(args.search_options).read_text()))
    else:
        options = SearchOptions.tuned(args.run_dir)
    if args.shortlist is not None:
        options = dataclasses.replace(options, shortlist=args.shortlist)
    if args.xla:
        options = dataclasses.replace(options, xla=True)
    if args.shards is not None:
        options = dataclasses.replace(options, shards=args.shards)
    path = export_run(args.run_dir, args.export_dir, options, args.dtype_policy)
    print(f"Exported {path}")


if __name__ == "__main__":
    main()
