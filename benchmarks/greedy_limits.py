"""What could still speed up greedy decoding at batch 64: four probes.

All four run the README's model on the same test documents, interleaved
rounds, and are reported as the export's time over the probe's time:

* `export greedy`: `HeadlineModule.search(documents, 1)`, the graph the
  SavedModel's `greedy` signature runs (text in, headlines out).
* `2 shards in parallel`: the batch split in two halves searched by two
  independent subgraphs of one `tf.function`, which the executor can run on
  the two cores at once. A gain would mean cores sit idle in the export.
* `minimal greedy loop`: ids in, ids out: the encoder, then `step` and
  `argmax` in a `tf.while_loop` with a fixed-size `TensorArray`; no bans, no
  dropping of ended rows, no text processing. A floor for graph mode.
* `minimal greedy loop, XLA`: the same function with `jit_compile=True`
  (compiled for this one batch shape; the first call compiles).

    python benchmarks/greedy_limits.py --run-dir runs/headlines \
        --data-dir ../shared/data/gigaword_sample
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run-dir", required=True, help="runs/<name> of a trained model")
    p.add_argument("--data-dir", required=True, help="folder holding org_data/")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=9)
    return p.parse_args(argv)


def minimal_greedy(model, max_length):
    """Ids to ids: the encoder, then `max_length` steps at most of `argmax`."""
    import tensorflow as tf

    from models.features import END_ID, START_ID

    def search(source_ids, source_ext_ids):
        state, memory = model.initial_decoder_state(source_ids, source_ext_ids)
        kernel = model.output_kernel()
        batch = tf.shape(source_ids)[0]

        def body(t, ids, state, finished, tokens):
            log_probs, state, _ = model.step(ids, state, memory, output_kernel=kernel)
            ids = tf.where(
                finished, END_ID, tf.argmax(log_probs, -1, output_type=tf.int32)
            )
            return t + 1, ids, state, finished | (ids == END_ID), tokens.write(t, ids)

        loop_vars = (
            0,
            tf.fill([batch], START_ID),
            state,
            tf.zeros([batch], tf.bool),
            tf.TensorArray(tf.int32, size=max_length),
        )
        *_, tokens = tf.while_loop(
            lambda t, ids, state, finished, tokens: (
                (t < max_length) & ~tf.reduce_all(finished)
            ),
            body,
            loop_vars,
        )
        return tokens.stack()

    return search


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf
    from common import interleaved, machine_info, markdown_table, median_ratio

    from models.config import SearchOptions
    from models.inference import HeadlineModule
    from models.runs import load_run, load_trained_model

    run_dir = Path(args.run_dir)
    _, features = load_run(run_dir)
    model = load_trained_model(run_dir)
    options = SearchOptions.tuned(run_dir)
    module = HeadlineModule(model, features, options)
    source_file = Path(args.data_dir) / "org_data" / "test.src.txt"
    docs = tf.constant(source_file.read_text().splitlines()[: args.batch])
    spec = [tf.TensorSpec([None], tf.string)]

    export_greedy = tf.function(lambda d: module.search(d, 1)["headlines"], spec)

    @tf.function(input_signature=spec)
    def two_shards(d):
        half = (tf.shape(d)[0] + 1) // 2
        parts = [d[:half], d[half:]]
        return tf.concat([module.search(p, 1)["headlines"] for p in parts], 0)

    source = features.encode_source(docs)
    ids, ext_ids = source["ids"], source["ext_ids"]
    search = minimal_greedy(model, options.max_length)
    plain, xla = tf.function(search), tf.function(search, jit_compile=True)

    same_shards = bool(tf.reduce_all(export_greedy(docs) == two_shards(docs)))
    same_xla = bool(tf.reduce_all(plain(ids, ext_ids) == xla(ids, ext_ids)))
    programs = {
        "export greedy": lambda: export_greedy(docs).numpy(),
        "2 shards in parallel": lambda: two_shards(docs).numpy(),
        "minimal greedy loop": lambda: plain(ids, ext_ids).numpy(),
        "minimal greedy loop, XLA": lambda: xla(ids, ext_ids).numpy(),
    }
    times = interleaved(programs, repeats=args.repeats, number=2, warmup=1)
    print(machine_info())
    print(
        f"batch {args.batch}, source length {int(ids.shape[1])}; identical "
        f"outputs: shards {same_shards}, XLA {same_xla}"
    )
    rows = [
        [
            name,
            f"{1000 * sorted(t)[len(t) // 2]:.1f}",
            f"{median_ratio(times, 'export greedy', name):.2f}x",
        ]
        for name, t in times.items()
    ]
    print(markdown_table(["program", "ms per batch (median)", "speed-up"], rows))


if __name__ == "__main__":
    main()
