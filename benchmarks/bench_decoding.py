"""Headlines per second: the exported SavedModel against a Python decoding loop.

SavedModel: `greedy` and `serving_default` (beam search) signatures of an
export, the whole search inside the graph (one call per batch).

References: what the TensorFlow "NMT with attention" tutorial does at
inference: a Python `for` loop over output positions, one eager call of the
decoder per token, `argmax` in Python, stopping when every row has ended.

* `tutorial_loop_greedy` (the reference): the tutorial's model
  (`bench_training.tutorial_model`: GRU encoder and decoder, `W1`/`W2` +
  `AdditiveAttention`, which re-projects the memory at every call, untied
  full-vocabulary logits) with the same sizes, run for as many steps as the
  trained model needs for the same batch (its weights are untrained, so it
  would never stop by itself).
* `python_loop_greedy`: the same loop over the *same* trained model
  (`HeadlineSummarizer.step`), so that ratio measures the decoding loop
  alone, not the model.

Each figure is the median over interleaved rounds of (reference time /
SavedModel time) for the same documents (from the test split). Beside it:
the GFLOP/s that our programs achieve (the exact count of `flops.py`, from
the batch's own lengths) and that as a share of this machine's fp32 matmul
peak, measured in the same run.

    python -m benchmarks.bench_decoding --model-dir saved_models/headlines \
        --run-dir runs/headlines --data-dir ../shared/data/gigaword_sample
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model-dir", required=True, help="saved_models/<name>[/<v>]")
    p.add_argument("--run-dir", required=True, help="runs/<name> of the same model")
    p.add_argument("--data-dir", required=True, help="org_data folder (test split)")
    p.add_argument("--tfds-dir", default=None)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument(
        "--baseline-model-dir",
        nargs="+",
        default=[],
        help="other exports of the same model (older code, an opt-in speed "
        "lever), timed in the same interleaved rounds, each named by its "
        "`<name>/<version>`",
    )
    return p.parse_args(argv)


def python_loop_greedy(model, features, documents, max_length):
    """The tutorial's loop: one eager decoder call per token."""
    import tensorflow as tf

    from models.text.features import END_ID, START_ID

    source = features.encode_source(documents)
    state, memory = model.initial_decoder_state(source["ids"], source["ext_ids"])
    ids = tf.fill([len(documents)], START_ID)
    finished = tf.zeros([len(documents)], tf.bool)
    tokens = []
    for _ in range(max_length):
        log_probs, state, _ = model.step(ids, state, memory)
        ids = tf.argmax(log_probs, axis=-1, output_type=tf.int32)
        tokens.append(ids)
        finished = finished | (ids == END_ID)
        if bool(tf.reduce_all(finished)):
            break
    return tf.stack(tokens, axis=1)


def tutorial_loop_greedy(reference, source_ids, steps):
    """The tutorial's loop on its own model: `steps` eager decoder calls."""
    import tensorflow as tf

    from models.text.features import START_ID

    enc_output, state, source_mask = reference.encode(source_ids)
    ids = tf.fill([tf.shape(source_ids)[0], 1], START_ID)
    tokens = []
    for _ in range(steps):
        logits, state = reference.decode(ids, state, enc_output, source_mask)
        ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
        tokens.append(ids)
    return tf.concat(tokens, axis=1)


def decoded_flops(saved, docs, features, config, options, members=1):
    """`{"greedy": FLOPs, "beam": FLOPs}` of decoding `docs` (`flops.py`).

    Counted from the source lengths and the headlines each signature wrote:
    a headline of n tokens took n + 1 steps (the end token), or `max_length`
    without one. For the beam, every step runs `beam_size` rows, and the
    chosen hypothesis's length stands for the search's (a lower bound: the
    search may run on until its other hypotheses end). An ensemble's
    `members` each do the whole count; a shortlist's output layer counts
    its own columns.
    """
    import numpy as np

    from benchmarks.flops import search_flops

    source_lengths = np.sum(features.encode_source(docs)["ids"].numpy() != 0, axis=1)
    work = {}
    for kind, signature, rows in (
        ("greedy", "greedy", 1),
        ("beam", "serving_default", options.beam_size),
    ):
        out = saved.signatures[signature](documents=docs)
        tokens = [len(h.split()) for h in out["normalized_headlines"].numpy()]
        steps = [min(n + 1, options.max_length) for n in tokens]
        counts = search_flops(
            config, source_lengths, steps, beam_size=rows, shortlist=options.shortlist
        )
        work[kind] = members * counts["total"]
    return work


def _load_export(model_dir):
    """`(SavedModel, SearchOptions)` of an export folder."""
    import json
    from pathlib import Path

    from models.decoding.saved_model_client import load_saved_model
    from models.settings.folder_layout import SEARCH_OPTIONS_FILE
    from models.settings.search import SearchOptions
    from models.settings.version_folders import resolve_version_dir

    version = resolve_version_dir(model_dir)
    options = SearchOptions(
        **json.loads((Path(version) / SEARCH_OPTIONS_FILE).read_text())
    )
    return load_saved_model(version), options


def _programs(docs, steps, reference, model, features, saved, options, others):
    """The timed programs of one batch `docs`, by name.

    `steps`: the tutorial loop's length, that of the trained model's greedy
    loop on the same batch; `others`: the baseline exports by label.
    """
    source_ids = features.encode_source(docs)["ids"]
    programs = {
        "tutorial_loop_greedy": lambda s=source_ids, n=steps: tutorial_loop_greedy(
            reference, s, n
        ).numpy(),
        "python_loop_greedy": lambda d=docs: python_loop_greedy(
            model, features, d, options.max_length
        ).numpy(),
        "savedmodel_greedy": lambda d=docs: saved.signatures["greedy"](documents=d)[
            "headlines"
        ].numpy(),
        "savedmodel_beam": lambda d=docs: saved.signatures["serving_default"](
            documents=d
        )["headlines"].numpy(),
    }
    for label, (export, _) in others.items():
        programs[f"{label} greedy"] = lambda d=docs, e=export: e.signatures["greedy"](
            documents=d
        )["headlines"].numpy()
        programs[f"{label} beam"] = lambda d=docs, e=export: e.signatures[
            "serving_default"
        ](documents=d)["headlines"].numpy()
    return programs


def _rows(batch, programs, times, work, peaks):
    """The table's rows of one batch: throughput, speed-ups, GFLOP/s."""
    from benchmarks.common import median_ratio

    rows = []
    for name in programs:
        seconds = sorted(times[name])[len(times[name]) // 2]
        label, kind = name.rsplit(" " if " " in name else "_", 1)
        flop = work.get(label, {}).get(kind)
        gflops = flop / seconds / 1e9 if flop else None
        rows.append(
            [
                batch,
                name,
                f"{batch / seconds:.1f}",
                f"{median_ratio(times, 'tutorial_loop_greedy', name):.2f}x",
                f"{median_ratio(times, 'python_loop_greedy', name):.2f}x",
                f"{gflops:.1f}" if gflops else "",
                (
                    f"{100 * gflops / peaks['fp32']:.1f}% / "
                    f"{100 * gflops / peaks['bf16']:.1f}%"
                )
                if gflops
                else "",
            ]
        )
    return rows


def _print_results(rows, against_baseline):
    """Prints the table, then each speed-up against a baseline export."""
    from benchmarks.common import markdown_table

    print(
        markdown_table(
            [
                "batch",
                "program",
                "headlines/s",
                "speed-up vs tutorial loop",
                "speed-up vs loop on our model",
                "GFLOP/s",
                "of fp32 / bf16 peak",
            ],
            rows,
        )
    )
    for line in against_baseline:
        print(line)


def main(argv=None):
    args = parse_args(argv)
    from pathlib import Path

    import tensorflow as tf

    from benchmarks.bench_training import tutorial_model
    from benchmarks.common import interleaved, machine_info, median_ratio
    from benchmarks.flops import machine_peaks
    from models import data
    from models.model.run_folder import load_run, load_trained_model
    from models.settings.data import DataSource
    from models.settings.version_folders import resolve_version_dir

    version = resolve_version_dir(args.model_dir)
    saved, options = _load_export(version)
    # Label: <name>/<version>.
    others = {
        "/".join(Path(resolve_version_dir(d)).parts[-2:]): _load_export(d)
        for d in args.baseline_model_dir
    }
    config, features = load_run(args.run_dir)
    model = load_trained_model(args.run_dir)

    test = data.load_split(
        "test", DataSource(data_dir=args.data_dir, tfds_dir=args.tfds_dir)
    )
    documents = [d for d, _ in test.take(max(args.batches)).as_numpy_iterator()]
    reference = tutorial_model(
        config.vocab_size,
        config.embedding_dim,
        config.hidden_size,
        config.attention_units,
    )
    print(machine_info())
    peaks = machine_peaks()
    print(
        f"matmul peak, 2048^3, this run: fp32 {peaks['fp32']:.0f} GFLOP/s, "
        f"bf16 {peaks['bf16']:.0f} GFLOP/s"
    )
    rows, against_baseline = [], []
    for batch in args.batches:
        docs = tf.constant(documents[:batch])
        steps = int(
            python_loop_greedy(model, features, docs, options.max_length).shape[1]
        )
        programs = _programs(
            docs, steps, reference, model, features, saved, options, others
        )
        exports = {"savedmodel": (saved, options), **others}
        times = interleaved(programs, repeats=args.repeats, number=1, warmup=1)
        members = len(getattr(model, "members", [model]))
        work = {
            label: decoded_flops(export, docs, features, config, opts, members)
            for label, (export, opts) in exports.items()
        }
        for label in others:
            for kind in ("greedy", "beam"):
                ratio = median_ratio(times, f"savedmodel_{kind}", f"{label} {kind}")
                against_baseline.append(
                    f"batch {batch}: {label} {kind} speed-up vs {version} {ratio:.2f}x"
                )
        rows += _rows(batch, programs, times, work, peaks)
    _print_results(rows, against_baseline)


if __name__ == "__main__":
    main()
