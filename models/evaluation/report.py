"""The report of an evaluation: ROUGE with intervals as a table, printed.

`models.evaluation.evaluate` scores the systems and writes `metrics.json`; this module
formats what it scored for the reader.
"""

from models.scoring.metrics import ROUGE_TYPES


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
