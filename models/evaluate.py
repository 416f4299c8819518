"""Evaluates an exported headline SavedModel: ROUGE with bootstrap intervals.

Only the SavedModel's signatures are used (through `tf.saved_model.load`), never
the model-building code, so this scores exactly what TF Serving would serve.

Usage:

    python -m models.evaluate --model-dir saved_models/headlines \
        --data-dir ../shared/data/gigaword_sample --max-examples 500

Decoding signatures: `serving_default` (beam search) and, when present,
`greedy`. Both are scored against the references, together with a lead
baseline (the first 8 words of the document). `metrics.json` and
`heatmaps/example_<i>.png` (through the `attention` signature) are written into
the version folder `saved_models/<name>/<version>/`.
"""

import argparse
import datetime
import importlib
import json
import os
import sys

from models import cjk
from models.batching import decode_in_batches, strings
from models.config import SPLITS
from models.errors import UserError, first_line
from models.layout import resolve_version_dir
from models.metrics import ROUGE_TOKENIZER, ROUGE_TYPES, rouge_with_intervals
from models.startup import add_verbose_flag, import_tensorflow

# System name -> signature name, in the order they are reported.
DECODING_SIGNATURES = {"beam": "serving_default", "greedy": "greedy"}
LEAD_WORDS = 8


# ---------------------------------------------------------------------------
# Baseline.


def lead_baseline(documents, n_words=LEAD_WORDS):
    """Lead baseline: the first `n_words` words of each document.

    Words are whitespace-separated, and each Chinese or Japanese character
    is one (`models.cjk.lead`).
    """
    if n_words < 1:
        raise ValueError(f"`n_words` must be >= 1. Received: n_words={n_words}")
    return [cjk.lead(document, n_words) for document in documents]


# ---------------------------------------------------------------------------
# SavedModel access.


def _load(saved_model):
    """Loads a SavedModel from a folder, or passes a loaded one through."""
    if isinstance(saved_model, str | os.PathLike):
        import tensorflow as tf

        return tf.saved_model.load(resolve_version_dir(saved_model))
    return saved_model


def _signature(model, name):
    signatures = model.signatures
    if name not in signatures:
        raise UserError(
            f"SavedModel has no '{name}' signature: it must be one of "
            f"{sorted(signatures)}. Received: signature='{name}'"
        )
    return signatures[name]


def _call(function, documents):
    """Calls a one-input signature on a batch of document strings."""
    import tensorflow as tf

    # Signatures take keyword arguments only; the contract names it
    # `documents`, but any single input name is accepted.
    (input_name,) = function.structured_input_signature[1].keys()
    return function(**{input_name: tf.constant(list(documents), dtype=tf.string)})


def decode_documents(
    saved_model_dir,
    documents,
    *,
    signature="serving_default",
    batch_size=64,
    progress=True,
    output="normalized_headlines",
):
    """Decodes headlines with a SavedModel signature, batch by batch.

    Args:
        saved_model_dir: `saved_models/<name>/<version>` (or `saved_models/<name>`
            for the newest version), or an already loaded SavedModel.
        documents: `N` source documents.
        signature: name of a signature mapping `documents: tf.string[None]` to
            `{"headlines": tf.string[None], ...}` (`serving_default` is beam
            search, `greedy` greedy decoding).
        batch_size: documents per call.
        progress: whether to show a tqdm progress bar.
        output: the signature's output to read: `"normalized_headlines"` (the
            data's form, for ROUGE) or `"headlines"` (readable text).

    Returns:
        The `N` decoded headlines.
    """
    if batch_size < 1:
        raise UserError(f"`batch_size` must be >= 1. Received: batch_size={batch_size}")
    function = _signature(_load(saved_model_dir), signature)
    return decode_in_batches(
        lambda batch: strings(_call(function, batch)[output]),
        documents,
        batch_size,
        progress=progress,
        desc=signature,
    )


# ---------------------------------------------------------------------------
# Evaluation.


def _read_split(split, data_dir, dataset, max_examples, tfds_dir=None):
    # Imported here so that the CLI answers --help and argument errors fast.
    data = importlib.import_module("models.data")

    ds = data.load_split(split, data_dir=data_dir, dataset=dataset, tfds_dir=tfds_dir)
    if max_examples is not None:
        ds = ds.take(max_examples)
    documents, references = [], []
    for document, summary in ds.as_numpy_iterator():
        documents.append(document.decode("utf-8"))
        references.append(summary.decode("utf-8"))
    if not documents:
        raise UserError(
            f"`split` must hold at least one example of '{dataset}'. "
            f"Received: split='{split}', which has none"
        )
    return documents, references


def _write_heatmaps(model, documents, references, version_dir, n_heatmaps):
    from models.heatmap import plot_attention

    if n_heatmaps <= 0 or "attention" not in model.signatures:
        return []
    batch = documents[:n_heatmaps]
    outputs = _call(model.signatures["attention"], batch)
    attention = outputs["attention"].numpy()
    # Labelled with the words as the reader sees them, not the tokens.
    source_words = strings(outputs["source_words"])
    headline_words = strings(outputs["headline_words"])
    heatmap_dir = os.path.join(version_dir, "heatmaps")
    paths = []
    for i in range(len(batch)):
        path = os.path.join(heatmap_dir, f"example_{i}.png")
        plot_attention(
            attention[i],
            source_words[i],
            headline_words[i],
            path,
            title=f"example {i} | reference: {references[i]}",
        )
        paths.append(path)
    return paths


def format_table(systems):
    """Formats `{system: {metric: {"f1", "low", "high"}}}` as a text table."""
    names = list(systems)
    cells = {
        (metric, name): "{f1:6.2f} [{low:6.2f}, {high:6.2f}]".format(
            **systems[name][metric]
        )
        for metric in ROUGE_TYPES
        for name in names
    }
    width = max([len(c) for c in cells.values()] + [len(n) for n in names])
    lines = [f"{'metric':<10}" + "".join(f"  {n:>{width}}" for n in names)]
    lines.append("-" * len(lines[0]))
    for metric in ROUGE_TYPES:
        lines.append(
            f"{metric:<10}" + "".join(f"  {cells[metric, n]:>{width}}" for n in names)
        )
    return "\n".join(lines)


def _check_split_and_size(split, max_examples):
    """Raises `UserError` for an unknown split or a `max_examples` below 1."""
    if split not in SPLITS:
        raise UserError(
            f"`split` must be one of {list(SPLITS)}. Received: split='{split}'"
        )
    if max_examples is not None and max_examples < 1:
        raise UserError(
            f"`max_examples` must be >= 1. Received: max_examples={max_examples}"
        )


def _metrics_record(
    version_dir, dataset, split, documents, signatures, systems, heatmaps, scoring
):
    """The dictionary `evaluate` writes to `metrics.json` and returns.

    Args:
        version_dir: the SavedModel's version folder.
        dataset: the dataset's name.
        split: the split scored.
        documents: the documents scored.
        signatures: `score_systems`'s system name -> signature name.
        systems: `score_systems`'s system name -> scores.
        heatmaps: paths of the heatmaps written.
        scoring: the `n_bootstrap`, `seed` and `readable` scored with.
    """
    return {
        "model_dir": os.path.abspath(version_dir),
        "dataset": dataset,
        "split": split,
        "num_examples": len(documents),
        "rouge_types": list(ROUGE_TYPES),
        "use_stemmer": True,
        "rouge_tokenizer": ROUGE_TOKENIZER,
        "confidence": 0.95,
        "n_bootstrap": scoring["n_bootstrap"],
        "seed": scoring["seed"],
        "signatures": signatures,
        "headlines": "headlines" if scoring["readable"] else "normalized_headlines",
        "systems": systems,
        "heatmaps": [os.path.relpath(p, version_dir) for p in heatmaps],
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
    }


def evaluate(
    model_dir,
    split="test",
    *,
    data_dir=None,
    dataset="gigaword",
    tfds_dir=None,
    max_examples=None,
    n_heatmaps=4,
    output=None,
    batch_size=64,
    n_bootstrap=1000,
    seed=0,
    progress=True,
    readable=False,
):
    """Scores the SavedModel's decoders and the lead baseline on a split.

    Reads `split` with `models.data.load_split`, decodes it with each decoding
    signature present (`serving_default` as "beam", `greedy` as "greedy"),
    scores them and the first-8-words baseline ("lead_8") against the
    references with `rouge_with_intervals`, writes `metrics.json`, prints a
    table and renders `n_heatmaps` attention heatmaps.

    Args:
        model_dir: `saved_models/<name>/<version>`, or `saved_models/<name>` for
            its newest integer version.
        split: one of `"train"`, `"validation"`, `"test"`.
        data_dir: data folder passed to `models.data.load_split`.
        dataset: dataset name passed to `models.data.load_split`.
        tfds_dir: TFDS data dir passed to `models.data.load_split`.
        max_examples: evaluate only the first `max_examples` pairs.
        n_heatmaps: number of examples rendered to
            `<version>/heatmaps/example_<i>.png` through the `attention`
            signature (skipped when the SavedModel has none).
        output: path of the metrics JSON; defaults to `<version>/metrics.json`.
        batch_size: documents per signature call.
        n_bootstrap: bootstrap resamples for the confidence intervals.
        seed: seed of the bootstrap.
        progress: whether to show progress bars.
        readable: score the readable `headlines` rather than the
            `normalized_headlines` (for references in written text, not in
            the data's normalized form).

    Returns:
        The metrics dictionary written to `metrics.json`; its `"systems"` maps
        each system to `{metric: {"f1", "low", "high"}}` (F1 x 100).

    Raises:
        UserError: for a missing model, a SavedModel without
            `serving_default`, an unknown split or a bad `max_examples`.
    """
    _check_split_and_size(split, max_examples)
    version_dir = resolve_version_dir(model_dir)
    documents, references = _read_split(
        split, data_dir, dataset, max_examples, tfds_dir
    )
    model = _load(version_dir)
    scoring = {"n_bootstrap": n_bootstrap, "seed": seed, "readable": readable}
    signatures, systems = score_systems(
        model,
        documents,
        references,
        batch_size=batch_size,
        progress=progress,
        **scoring,
    )
    heatmaps = _write_heatmaps(model, documents, references, version_dir, n_heatmaps)
    metrics = _metrics_record(
        version_dir, dataset, split, documents, signatures, systems, heatmaps, scoring
    )
    _save_and_report(metrics, output, version_dir)
    return metrics


def score_systems(
    model,
    documents,
    references,
    *,
    batch_size,
    n_bootstrap,
    seed,
    progress,
    readable=False,
):
    """Decodes with each decoding signature and scores it and the baseline.

    Returns:
        `(signatures, systems)`: system name -> signature name (None for the
        baseline), and system name -> `rouge_with_intervals` result.

    Raises:
        UserError: if the SavedModel has no `serving_default` signature.
    """
    _signature(model, "serving_default")
    signatures = {
        system: name
        for system, name in DECODING_SIGNATURES.items()
        if name in model.signatures
    }
    outputs = {
        system: decode_documents(
            model,
            documents,
            signature=name,
            batch_size=batch_size,
            progress=progress,
            output="headlines" if readable else "normalized_headlines",
        )
        for system, name in signatures.items()
    }
    # The documents are already in the data's normalized form, like the
    # references, so the baseline needs no further processing.
    baseline = f"lead_{LEAD_WORDS}"
    outputs[baseline] = lead_baseline(documents, LEAD_WORDS)
    signatures[baseline] = None
    systems = {
        system: rouge_with_intervals(
            predictions, references, n_bootstrap=n_bootstrap, seed=seed
        )
        for system, predictions in outputs.items()
    }
    return signatures, systems


def _write_json(metrics, path):
    with open(path, "w") as f:
        json.dump(metrics, f, indent=2)
        f.write("\n")


def _save_and_report(metrics, output, version_dir):
    """Writes `metrics` to `output` (default `<version>/metrics.json`), prints it."""
    output = os.fspath(output) if output else os.path.join(version_dir, "metrics.json")
    _write_json(metrics, output)
    _print_report(metrics, output, os.path.join(version_dir, "heatmaps"))


def _print_report(metrics, output, heatmap_dir):
    print(
        f"ROUGE F1 x100 [{int(metrics['confidence'] * 100)}% bootstrap interval] on "
        f"{metrics['dataset']}/{metrics['split']}, {metrics['num_examples']} examples"
    )
    print(format_table(metrics["systems"]))
    print(f"metrics: {output}")
    if metrics["heatmaps"]:
        print(f"heatmaps: {heatmap_dir}")


# ---------------------------------------------------------------------------
# CLI.


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m models.evaluate",
        description=(
            "Score an exported headline SavedModel with ROUGE (F1 with 95% "
            "bootstrap intervals) for its beam ('serving_default') and greedy "
            "('greedy') signatures and a first-8-words baseline. Writes "
            "metrics.json and attention heatmaps into the version folder."
        ),
    )
    parser.add_argument(
        "--model-dir",
        required=True,
        help="saved_models/<name>/<version>, or saved_models/<name> for its "
        "newest integer version.",
    )
    parser.add_argument(
        "--split",
        default="test",
        choices=SPLITS,
        help="split to score (default: test).",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="org_data-layout folder (or its parent, or ggw_data.zip), e.g. "
        "../shared/data/gigaword_sample.",
    )
    parser.add_argument("--dataset", default="gigaword", help="default: gigaword.")
    parser.add_argument("--tfds-dir", help="where TFDS keeps prepared datasets.")
    parser.add_argument(
        "--max-examples",
        type=int,
        default=None,
        metavar="N",
        help="score only the first N pairs.",
    )
    parser.add_argument(
        "--n-heatmaps",
        type=int,
        default=4,
        metavar="K",
        help="attention heatmaps to render (default: 4; 0 for none).",
    )
    parser.add_argument(
        "--batch-size", type=int, default=64, help="documents per call (default: 64)."
    )
    parser.add_argument(
        "--n-bootstrap",
        type=int,
        default=1000,
        help="bootstrap resamples (default: 1000).",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="bootstrap seed (default: 0)."
    )
    parser.add_argument(
        "--output",
        default=None,
        help="metrics JSON path (default: <version>/metrics.json).",
    )
    parser.add_argument(
        "--readable",
        action="store_true",
        help="score the readable `headlines` output, not `normalized_headlines` "
        "(for references in written text rather than Gigaword's form).",
    )
    add_verbose_flag(parser)
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        # Checked before TensorFlow is imported, to fail fast.
        resolve_version_dir(args.model_dir)
        import_tensorflow(args.verbose)
        evaluate(
            args.model_dir,
            args.split,
            data_dir=args.data_dir,
            dataset=args.dataset,
            tfds_dir=args.tfds_dir,
            max_examples=args.max_examples,
            n_heatmaps=args.n_heatmaps,
            output=args.output,
            batch_size=args.batch_size,
            n_bootstrap=args.n_bootstrap,
            seed=args.seed,
            progress=True,
            readable=args.readable,
        )
    except (UserError, OSError) as error:
        print(f"error: {first_line(error)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
