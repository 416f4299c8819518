"""Evaluates an exported headline SavedModel: ROUGE with bootstrap intervals.

Only the SavedModel's signatures are used (through
`models.decoding.saved_model_client`), never the model-building code, so
this scores exactly what TF Serving would serve. The lead baseline is
`models.scoring.baselines`', the heatmaps `models.evaluation.heatmap`'s; the
printed table is here. The command line's flags are `EvaluateSettings`'
fields.

Usage:

    python -m models.evaluation --model-dir saved_models/headlines \
        --data-dir ../shared/data/gigaword_sample --max-examples 500

Decoding signatures: `serving_default` (beam search) and, when present,
`greedy`. Both are scored against the references, together with a lead
baseline (the first N words of the document, `lead_<N>`: N is the one the
run chose on validation, recorded in the export's `training.json`, else its
`lengths.json`'s, else 8). `metrics.json` and
`heatmaps/example_<i>.png` (through the `attention` signature) are written into
the version folder `saved_models/<name>/<version>/`.
"""

import dataclasses
import datetime
import importlib
import os
import sys

from models.decoding.saved_model_client import (
    decode_documents,
    decode_outputs,
    get_signature,
    load_saved_model,
)
from models.scoring.baselines import (
    LEAD_WORDS,
    chosen_lead_tokens,
    lead_baseline,
    lead_name,
)
from models.scoring.metrics import ROUGE_TOKENIZER, ROUGE_TYPES, rouge_with_intervals
from models.settings.data import SPLITS, DataSource
from models.settings.errors import UserError, first_line
from models.settings.flags import SettingsParser, add_config_flags, parse_settings
from models.settings.folder_layout import HEATMAPS_DIR, METRICS_FILE
from models.settings.json_files import write_json
from models.settings.startup import import_tensorflow, verbose_field
from models.settings.version_folders import resolve_version_dir

# System name -> signature name, in the order they are reported.
DECODING_SIGNATURES = {"beam": "serving_default", "greedy": "greedy"}
# The outputs of the `attention` signature that a heatmap draws.
HEATMAP_OUTPUTS = ("attention", "source_words", "headline_words")


@dataclasses.dataclass
class EvaluateSettings:
    """The settings of `python -m models.evaluation`, one flag each.

    Attributes:
        model_dir: saved_models/<name>/<version>, or saved_models/<name> for
            its newest integer version.
        split: Split to score.
        data_dir: org_data-layout folder (or its parent, or ggw_data.zip),
            e.g. ../shared/data/gigaword_sample.
        dataset: TFDS dataset name.
        tfds_dir: Where TFDS keeps prepared datasets (default: TFDS's own).
        max_examples: Score only the first N pairs (default: all).
        n_heatmaps: Attention heatmaps to render (0 for none).
        batch_size: Documents per call.
        n_bootstrap: Bootstrap resamples.
        seed: Bootstrap seed.
        output: Metrics JSON path (default: <version>/metrics.json).
        readable: Score the readable `headlines` output, not
            `normalized_headlines` (for references in written text rather
            than Gigaword's form).
    """

    model_dir: str
    split: str = dataclasses.field(default="test", metadata={"choices": SPLITS})
    data_dir: str | None = None
    dataset: str = "gigaword"
    tfds_dir: str | None = None
    max_examples: int | None = dataclasses.field(
        default=None, metadata={"metavar": "N"}
    )
    n_heatmaps: int = dataclasses.field(default=4, metadata={"metavar": "K"})
    batch_size: int = 64
    n_bootstrap: int = 1000
    seed: int = 0
    output: str | None = None
    readable: bool = dataclasses.field(default=False, metadata={"action": "store_true"})
    verbose: bool = verbose_field()

    def source(self):
        """The `DataSource` to read: the dataset and folders given, with the
        names of the features the model was trained on (the export's
        record)."""
        return DataSource.for_model(
            resolve_version_dir(self.model_dir),
            self.dataset,
            self.data_dir,
            self.tfds_dir,
        )


# ---------------------------------------------------------------------------
# Evaluation.


def format_table(systems):
    """Formats `{system: {metric: {"f1", "low", "high"}}}` as a text table.

    Returns:
        One row per ROUGE type, one column per system, each cell
        `f1 [low, high]`.
    """
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


def print_report(metrics, metrics_path, heatmap_dir):
    """Prints the scores of `metrics` (`models.evaluation.evaluate`'s record) and where
    the metrics and the heatmaps were written."""
    print(
        f"ROUGE F1 x100 [{int(metrics['confidence'] * 100)}% bootstrap interval] on "
        f"{metrics['dataset']}/{metrics['split']}, {metrics['num_examples']} examples"
    )
    print(format_table(metrics["systems"]))
    print(f"metrics: {metrics_path}")
    if metrics["heatmaps"]:
        print(f"heatmaps: {heatmap_dir}")


def _read_split(split, source, max_examples):
    # Imported here so that the CLI answers --help and argument errors fast.
    data = importlib.import_module("models.data")

    ds = data.load_split(split, source)
    if max_examples is not None:
        ds = ds.take(max_examples)
    documents, references = [], []
    for document, summary in ds.as_numpy_iterator():
        documents.append(document.decode("utf-8"))
        references.append(summary.decode("utf-8"))
    if not documents:
        raise UserError(
            f"`split` must hold at least one example of '{source.dataset}'. "
            f"Received: split='{split}', which has none"
        )
    return documents, references


def _write_heatmaps(model, documents, references, version_dir, n_heatmaps):
    """Heatmaps of the first `n_heatmaps` documents through the `attention`
    signature, in `<version>/heatmaps/`; none when the export has none."""
    from models.evaluation import heatmap

    if n_heatmaps <= 0 or "attention" not in model.signatures:
        return []
    examples = decode_outputs(
        model,
        documents[:n_heatmaps],
        signature="attention",
        outputs=HEATMAP_OUTPUTS,
        batch_size=n_heatmaps,
        progress=False,
    )
    titles = [
        f"example {i} | reference: {reference}"
        for i, reference in enumerate(references[: len(examples)])
    ]
    return heatmap.plot_examples(
        examples, titles, os.path.join(version_dir, HEATMAPS_DIR)
    )


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


def _metrics_record(version_dir, dataset, split, documents, scored, heatmaps, scoring):
    """The dictionary `evaluate` writes to `metrics.json` and returns.

    Args:
        version_dir: the SavedModel's version folder.
        dataset: the dataset's name.
        split: the split scored.
        documents: the documents scored.
        scored: `score_systems`'s `(signatures, systems)`: system name ->
            signature name, and system name -> scores.
        heatmaps: paths of the heatmaps written.
        scoring: the `n_bootstrap`, `seed` and `readable` scored with.
    """
    signatures, systems = scored
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
    source=None,
    max_examples=None,
    n_heatmaps=4,
    output=None,
    batch_size=64,
    n_bootstrap=1000,
    seed=0,
    progress=True,
    readable=False,
    lead_tokens=None,
):
    """Scores the SavedModel's decoders and the lead baseline on a split.

    Reads `split` with `models.data.load_split`, with the names of the
    features the export records (`models.settings.data.DataSource`), decodes
    it with each decoding signature present (`serving_default` as "beam",
    `greedy` as "greedy"), scores them and the lead baseline (`lead_<N>`, the
    first N words, N the run's: `models.scoring.baselines.chosen_lead_tokens`)
    against the references with `rouge_with_intervals`, writes
    `metrics.json`, prints a table and renders `n_heatmaps` attention
    heatmaps.

    Args:
        model_dir: `saved_models/<name>/<version>`, or `saved_models/<name>` for
            its newest integer version.
        split: one of `"train"`, `"validation"`, `"test"`.
        source: the `DataSource` the split is read from
            (`models.data.load_split`); None: the one the export records.
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
        lead_tokens: the lead baseline's N; None: the export's
            (`chosen_lead_tokens`).

    Returns:
        The metrics dictionary written to `metrics.json`; its `"systems"` maps
        each system to `{metric: {"f1", "low", "high"}}` (F1 x 100).

    Raises:
        UserError: for a missing model, a SavedModel without
            `serving_default`, an unknown split or a bad `max_examples`.
    """
    _check_split_and_size(split, max_examples)
    version_dir = resolve_version_dir(model_dir)
    source = source or DataSource.recorded(version_dir)
    documents, references = _read_split(split, source, max_examples)
    model = load_saved_model(version_dir)
    scoring = {"n_bootstrap": n_bootstrap, "seed": seed, "readable": readable}
    scored = score_systems(
        model,
        documents,
        references,
        batch_size=batch_size,
        progress=progress,
        lead_tokens=lead_tokens or chosen_lead_tokens(version_dir),
        **scoring,
    )
    heatmaps = _write_heatmaps(model, documents, references, version_dir, n_heatmaps)
    metrics = _metrics_record(
        version_dir, source.dataset, split, documents, scored, heatmaps, scoring
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
    lead_tokens=LEAD_WORDS,
):
    """Decodes with each decoding signature and scores it and the baseline.

    The baseline is the first `lead_tokens` words of each document.

    Returns:
        `(signatures, systems)`: system name -> signature name (None for the
        baseline), and system name -> `rouge_with_intervals` result.

    Raises:
        UserError: if the SavedModel has no `serving_default` signature.
    """
    get_signature(model, "serving_default")
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
    baseline = lead_name(lead_tokens)
    outputs[baseline] = lead_baseline(documents, lead_tokens)
    signatures[baseline] = None
    systems = {
        system: rouge_with_intervals(
            predictions, references, n_bootstrap=n_bootstrap, seed=seed
        )
        for system, predictions in outputs.items()
    }
    return signatures, systems


def _save_and_report(metrics, output, version_dir):
    """Writes `metrics` to `output` (default `<version>/metrics.json`), prints it."""
    output = os.fspath(output) if output else os.path.join(version_dir, METRICS_FILE)
    write_json(output, metrics)
    print_report(metrics, output, os.path.join(version_dir, HEATMAPS_DIR))


# ---------------------------------------------------------------------------
# CLI.


def argument_parser():
    """The parser of the command line: one flag per settings field."""
    parser = SettingsParser(
        prog="python -m models.evaluation",
        description=(
            "Score an exported headline SavedModel with ROUGE (F1 with 95% "
            "bootstrap intervals) for its beam ('serving_default') and greedy "
            "('greedy') signatures and a lead baseline (the first N words, N "
            "the run's). Writes "
            "metrics.json and attention heatmaps into the version folder."
        ),
    )
    add_config_flags(parser, EvaluateSettings)
    return parser


def parse_evaluate_settings(argv=None):
    """`EvaluateSettings` from the command line's arguments (`sys.argv[1:]`)."""
    return parse_settings(argument_parser(), EvaluateSettings, argv)


def main(argv=None):
    settings = parse_evaluate_settings(argv)
    try:
        # Checked before TensorFlow is imported, to fail fast.
        resolve_version_dir(settings.model_dir)
        import_tensorflow(settings.verbose)
        evaluate(
            settings.model_dir,
            settings.split,
            source=settings.source(),
            max_examples=settings.max_examples,
            n_heatmaps=settings.n_heatmaps,
            output=settings.output,
            batch_size=settings.batch_size,
            n_bootstrap=settings.n_bootstrap,
            seed=settings.seed,
            progress=True,
            readable=settings.readable,
        )
    except (UserError, OSError) as error:
        print(f"error: {first_line(error)}", file=sys.stderr)
        return 1
    return 0
