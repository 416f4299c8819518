"""Where greedy decoding spends its time at batch 64: encoder, step, pieces.

Each piece of `HeadlineSummarizer`'s decoding runs alone in a `tf.function`
on the same 64 test documents; reported: the median over interleaved rounds
of each piece's time per call. `--trace DIR` also records the whole greedy
search with the TensorFlow profiler, for TensorBoard's Profile tab
(`pip install tensorboard-plugin-profile`, `tensorboard --logdir DIR`): the
time of every op of the loop.

    python benchmarks/profile_greedy.py --model-dir saved_models/headlines/1 \
        --run-dir runs/headlines --data-dir ../shared/data/gigaword_sample
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model-dir", required=True, help="an export's version folder")
    p.add_argument("--run-dir", required=True, help="runs/<name> of the same model")
    p.add_argument("--data-dir", required=True, help="folder holding org_data/")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--trace", help="write a TensorFlow profiler trace here")
    return p.parse_args(argv)


def one_step(model, ids, ext_ids):
    """The inputs and intermediates of a greedy search's first step, as a
    dict: what the step's pieces are timed on (also by `xla_pieces.py`)."""
    import tensorflow as tf

    from models.features import START_ID

    state, memory = model.initial_decoder_state(ids, ext_ids)
    start = tf.fill([tf.shape(ids)[0]], START_ID)
    embedded = model._embed_target(start)
    rnn_states = [state[f"rnn_{i}"] for i in range(model._state_count)]
    output, _ = model.decoder_rnn.cell(embedded, rnn_states)
    context, weights = model.attention.step(output, memory["attention"])
    kernel = model.output_kernel()  # once per search, as the export does
    features = model._features(context, output, False)
    logits = model.vocabulary_logits(features, kernel)
    p_gen = model.pointer([context, output, embedded]) if model.pointer else None
    return dict(
        state=state,
        memory=memory,
        kernel=kernel,
        start=start,
        embedded=embedded,
        rnn_states=rnn_states,
        output=output,
        context=context,
        weights=weights,
        features=features,
        logits=logits,
        p_gen=p_gen,
    )


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf
    from common import interleaved, machine_info, markdown_table
    from keras import ops

    from keras_attn.pointer import pointer_log_distribution
    from models.config import SearchOptions
    from models.inference import HeadlineModule
    from models.layout import resolve_version_dir
    from models.runs import load_run, load_trained_model

    version = Path(resolve_version_dir(args.model_dir))
    options = SearchOptions(**json.loads((version / "search_options.json").read_text()))
    config, features = load_run(args.run_dir)
    model = load_trained_model(args.run_dir)
    source_file = Path(args.data_dir) / "org_data" / "test.src.txt"
    docs = tf.constant(source_file.read_text().splitlines()[: args.batch])

    module = HeadlineModule(model, features, options)
    greedy = tf.function(lambda d: module.search(d, 1))
    source = features.encode_source(docs)
    step = one_step(model, source["ids"], source["ext_ids"])
    state, memory, kernel = step["state"], step["memory"], step["kernel"]
    ids, embedded, rnn_states = step["start"], step["embedded"], step["rnn_states"]
    output, context, weights = step["output"], step["context"], step["weights"]
    logits, p_gen = step["logits"], step["p_gen"]

    pieces = {
        "greedy search, whole": lambda: greedy(docs)["headlines"],
        "text to ids": lambda: features.encode_source(docs)["ids"],
        "encoder (initial_decoder_state)": lambda: model.initial_decoder_state(
            source["ids"], source["ext_ids"]
        )[0]["rnn_0"],
        "one step (step, all 64 rows)": lambda: model.step(
            ids, state, memory, output_kernel=kernel
        )[0],
        "  decoder cell": lambda: model.decoder_rnn.cell(embedded, rnn_states)[0],
        "  attention step": lambda: model.attention.step(output, memory["attention"])[
            0
        ],
        "  output layer (logits)": lambda: model.vocabulary_logits(
            model._features(context, output, False), kernel
        ),
    }
    if p_gen is None:
        pieces["  log-softmax"] = lambda: ops.log_softmax(logits, -1)
    else:
        pieces["  log-softmax + copy mixture"] = lambda: pointer_log_distribution(
            p_gen,
            logits,
            weights,
            memory["source_ext_ids"],
            num_oov=config.max_source_length,
        )
    out = greedy(docs)
    pieces["readable text (from the headline tokens)"] = lambda: features.readable(
        out["headline_tokens"], source, out["attention"]
    )
    programs = {}
    for name, fn in pieces.items():
        compiled = tf.function(fn)
        programs[name] = lambda f=compiled: f().numpy()
    steps = int(greedy(docs)["headline_tokens"].shape[1])
    times = interleaved(programs, repeats=args.repeats, number=5, warmup=1)
    print(machine_info())
    print(
        f"batch {args.batch}, source length {int(source['ids'].shape[1])}, "
        f"greedy steps {steps}"
    )
    rows = [[name, f"{1000 * sorted(t)[len(t) // 2]:.2f}"] for name, t in times.items()]
    print(markdown_table(["piece", "ms per call (median)"], rows))
    if args.trace:
        tf.profiler.experimental.start(args.trace)
        for _ in range(3):
            greedy(docs)["headlines"].numpy()
        tf.profiler.experimental.stop()
        print(f"Profiler trace: tensorboard --logdir {args.trace}")


if __name__ == "__main__":
    main()
