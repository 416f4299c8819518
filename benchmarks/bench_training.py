"""Training throughput: the project's summarizer against a TF-tutorial-style reference.

Project: `HeadlineSummarizer` built and compiled by `models.training.fit.build_model`,
fed by the train.py pipeline (`encode_dataset` + `batched`: length buckets,
padding to the longest example of each batch). The model configuration is the
lead's run (`runs/headlines/config.json`: LSTM, bidirectional encoder,
Bahdanau attention, copy, tied embeddings) unless overridden.

Reference: built the way the TensorFlow "NMT with attention" tutorial (TF 2.x,
`AdditiveAttention` version) builds it: embedding, GRU encoder, GRU decoder
over the teacher-forced target, `W1`/`W2` Dense + `keras.layers.AdditiveAttention`,
`Wc` tanh, untied full-vocabulary `Dense` logits, masked cross-entropy,
float32, no XLA, every batch padded to the longest source and target of the
whole dataset. Same vocabulary, embedding, hidden and attention sizes; same
examples, ids from the same `TextFeatures` (copy ids map to <unk>).

Both train steps are `tf.function(model.train_step, reduce_retracing=True)`
(as `fit` does), fed from persistent iterators, timed in interleaved blocks
of `--block` steps. Reported: examples/second of each, the ratio
project / reference (median over rounds), the achieved matmul GFLOP/s (the
project's from `flops.training_flops`, the exact count on each batch's
padded lengths; the reference's from `reference_training_flops`) against
this machine's fp32 and bf16 matmul peaks measured in the same run
(`flops.machine_peaks`), and the peak RSS of the process.

    nice -n 19 python -m benchmarks.bench_training
    nice -n 19 python -m benchmarks.bench_training --variants bf16 xla
    nice -n 19 python -m benchmarks.bench_training --only project --batch-size 128
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
REPO = Path(__file__).resolve().parent.parent


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", default="/work/shared/data/gigaword_sample")
    p.add_argument("--tfds-dir", default="/tmp/tfds")
    p.add_argument(
        "--config",
        default=str(REPO / "runs/headlines/config.json"),
        help="model config JSON (default: the lead's run; falls back to defaults)",
    )
    p.add_argument(
        "--vocab",
        default=str(REPO / "runs/headlines/vocab.txt"),
        help="vocabulary file (built from the examples when missing)",
    )
    p.add_argument("--examples", type=int, default=8000, help="training examples used")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-source-length", type=int, help="override the config's")
    p.add_argument("--block", type=int, default=20, help="steps per timed block")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    p.add_argument("--warmup", type=int, default=12, help="untimed steps per program")
    p.add_argument("--jit-compile", action="store_true", help="project model: XLA")
    p.add_argument(
        "--mixed-precision",
        choices=("mixed_bfloat16", "mixed_float16"),
        help="project model: dtype policy",
    )
    p.add_argument(
        "--variants",
        nargs="*",
        default=[],
        choices=("bf16", "xla", "sampled"),
        help="extra project programs in the same interleaving",
    )
    p.add_argument(
        "--only",
        choices=("project", "reference"),
        help="time one program alone (memory measurements)",
    )
    p.add_argument(
        "--sampled-softmax",
        type=int,
        default=1024,
        metavar="K",
        help="sampled words per batch of the `sampled` variant",
    )
    return p.parse_args(argv)


def tutorial_model(vocab_size, embedding_dim, units, attention_units):
    """The TF NMT tutorial's encoder-decoder (AdditiveAttention version)."""
    import keras
    import tensorflow as tf

    class Reference(keras.Model):
        def __init__(self):
            super().__init__()
            self.enc_embedding = keras.layers.Embedding(vocab_size, embedding_dim)
            self.enc_gru = keras.layers.GRU(
                units,
                return_sequences=True,
                return_state=True,
                recurrent_initializer="glorot_uniform",
            )
            self.dec_embedding = keras.layers.Embedding(vocab_size, embedding_dim)
            self.dec_gru = keras.layers.GRU(
                units,
                return_sequences=True,
                return_state=True,
                recurrent_initializer="glorot_uniform",
            )
            self.W1 = keras.layers.Dense(attention_units, use_bias=False)
            self.W2 = keras.layers.Dense(attention_units, use_bias=False)
            self.attention = keras.layers.AdditiveAttention()
            self.Wc = keras.layers.Dense(units, activation="tanh", use_bias=False)
            self.fc = keras.layers.Dense(vocab_size)

        def encode(self, source):
            source_mask = source != 0
            enc_output, enc_state = self.enc_gru(
                self.enc_embedding(source), mask=source_mask
            )
            return enc_output, enc_state, source_mask

        def decode(self, target_in, state, enc_output, source_mask):
            """Logits `(B, T, V)` and the new state; the tutorial's decoder
            call, which projects the memory (`W2`) at every call."""
            rnn_output, state = self.dec_gru(
                self.dec_embedding(target_in), initial_state=state
            )
            w1_query = self.W1(rnn_output)
            w2_key = self.W2(enc_output)
            query_mask = tf.ones(tf.shape(rnn_output)[:-1], dtype=bool)
            context, _ = self.attention(
                [w1_query, enc_output, w2_key],
                mask=[query_mask, source_mask],
                return_attention_scores=True,
            )
            attention_vector = self.Wc(tf.concat([context, rnn_output], axis=-1))
            return self.fc(attention_vector), state

        def call(self, inputs, training=None):
            enc_output, enc_state, source_mask = self.encode(inputs["source_ids"])
            logits, _ = self.decode(
                inputs["target_in"], enc_state, enc_output, source_mask
            )
            return logits

        def compute_loss(
            self, x=None, y=None, y_pred=None, sample_weight=None, training=True
        ):
            loss = tf.keras.losses.sparse_categorical_crossentropy(
                y, y_pred, from_logits=True
            )
            mask = tf.cast(y != 0, loss.dtype)
            return tf.reduce_sum(loss * mask) / tf.reduce_sum(mask)

    return Reference()


def reference_training_flops(config, batch, source_len, target_len):
    """Matmul FLOPs (2 per multiply-add) of one training step of the tutorial
    model (`tutorial_model`): its forward products, x3 for backpropagation.

    Its GRU encoder is one direction of H units, its output layer untied
    over the whole vocabulary; the rest is `flops.py`'s count. Element-wise
    ops (tanh, softmax, gates) are left out.
    """
    E, H, A, V = (
        config.embedding_dim,
        config.hidden_size,
        config.attention_units,
        config.vocab_size,
    )
    S, T = source_len, target_len
    encoder = S * 2 * (E + H) * 3 * H
    decoder = T * 2 * (E + H) * 3 * H
    attention = S * 2 * H * A + T * 2 * H * A  # key and query projections
    attention += T * S * (2 * A + 2 * H)  # v . tanh(...) and the context
    attentional = T * 2 * (2 * H) * H
    output = T * 2 * H * V
    return 3 * batch * (encoder + decoder + attention + attentional + output)


def _config_and_features(args, split):
    """The model configuration, its `TextFeatures` and the `TrainOptions`.

    The configuration is `--config`'s (the defaults and the Gigaword
    sample's lengths when that file is missing) with `--max-source-length`
    applied; the vocabulary, which sets its `vocab_size`, is `--vocab`'s, or
    built from `split` when that file is missing.
    """
    from models import data
    from models.model import run_folder
    from models.settings.fit import TrainOptions
    from models.settings.model import SummarizerConfig
    from models.text.features import TextFeatures

    config = (
        SummarizerConfig.load(args.config)
        if Path(args.config).exists()
        # What a run settles on the Gigaword sample (`train.py`).
        else SummarizerConfig(
            max_source_length=64, max_target_length=20, normalization="gigaword"
        )
    )
    if args.max_source_length:
        config.max_source_length = args.max_source_length
    options = TrainOptions(batch_size=args.batch_size)
    if Path(args.vocab).exists():
        vocabulary = run_folder.load_vocabulary(args.vocab)
        features = TextFeatures(
            vocabulary, config.max_source_length, config.max_target_length
        )
        config.vocab_size = features.vocab_size
    else:
        vocabulary = data.split_vocabulary(
            split, config.vocab_size, min_count=options.min_count
        )
        config.vocab_size = len(vocabulary)
        features = run_folder.make_features(vocabulary, config)
    return config, features, options


def _reference_dataset(encoded, batch_size, vocab_size):
    """The reference's batches: everything padded to the dataset's longest.

    Returns:
        `(dataset, max_source, max_target)`; copy ids map to <unk> (1).
    """
    import tensorflow as tf

    max_s = max_t = 0
    for inputs, target in encoded:
        max_s = max(max_s, int(inputs["source_ids"].shape[0]))
        max_t = max(max_t, int(target.shape[0]))

    def to_reference(inputs, target):
        unk = lambda ids: tf.where(ids >= vocab_size, 1, ids)  # noqa: E731
        return (
            {"source_ids": inputs["source_ids"], "target_in": unk(inputs["target_in"])},
            unk(target),
        )

    reference_ds = (
        encoded.map(to_reference)
        .shuffle(10_000, seed=0)
        .padded_batch(
            batch_size,
            padded_shapes=({"source_ids": [max_s], "target_in": [max_t]}, [max_t]),
        )
        .repeat()
        .prefetch(tf.data.AUTOTUNE)
    )
    return reference_ds, max_s, max_t


def _project_program(args, encoded, jit, policy, model_config):
    """`(model, train step, batch iterator)` of the project's model, fed by
    train.py's pipeline."""
    import keras
    import tensorflow as tf

    from models import data
    from models.settings.fit import TrainOptions
    from models.training import fit as training

    keras.mixed_precision.set_global_policy(policy or "float32")
    opts = TrainOptions(
        batch_size=args.batch_size, jit_compile=jit, mixed_precision=policy
    )
    model = training.build_model(model_config, opts)
    keras.mixed_precision.set_global_policy("float32")
    step = tf.function(model.train_step, reduce_retracing=True, jit_compile=jit)
    batches = data.batched(
        encoded,
        args.batch_size,
        training=True,
        max_source_length=model_config.max_source_length,
    )
    batches = iter(batches.repeat())
    return model, step, batches


def _reference_program(config, options, reference_ds):
    """`(model, train step, batch iterator)` of the tutorial's model."""
    import keras
    import tensorflow as tf

    ref = tutorial_model(
        config.vocab_size,
        config.embedding_dim,
        config.hidden_size,
        config.attention_units,
    )
    ref_in, ref_out = next(iter(reference_ds))
    ref(ref_in)
    ref.compile(optimizer=keras.optimizers.Adam(options.learning_rate))
    return (
        ref,
        tf.function(ref.train_step, reduce_retracing=True),
        iter(reference_ds),
    )


def _programs(args, config, options, encoded, reference_ds):
    """The timed programs by name, as `--only` and `--variants` select them."""
    programs = {}
    if args.only != "reference":
        programs["project"] = _project_program(
            args, encoded, args.jit_compile, args.mixed_precision, config
        )
        if "bf16" in args.variants:
            programs["project+bf16"] = _project_program(
                args, encoded, args.jit_compile, "mixed_bfloat16", config
            )
        if "xla" in args.variants:
            programs["project+xla"] = _project_program(
                args, encoded, True, args.mixed_precision, config
            )
        if "sampled" in args.variants:
            sampled_config = dataclasses.replace(
                config, sampled_softmax=args.sampled_softmax
            )
            programs["project+sampled"] = _project_program(
                args, encoded, args.jit_compile, args.mixed_precision, sampled_config
            )
    if args.only != "project":
        programs["reference"] = _reference_program(config, options, reference_ds)
    return programs


def _run_block(programs, stats, config, name, steps, record=True):
    """Runs `steps` steps of program `name`; returns its examples/second.

    With `record`, adds the block's examples, seconds and FLOPs to
    `stats[name]`.
    """
    from benchmarks.flops import training_flops

    model, step, iterator = programs[name]
    batches = [next(iterator) for _ in range(steps)]  # input outside the timing
    flops = 0.0
    examples = 0
    for inputs, target in batches:
        b, s = inputs["source_ids"].shape
        t = target.shape[1]
        examples += b
        if name == "reference":
            flops += reference_training_flops(config, b, s, t)
        else:
            flops += training_flops(model.config, b, s, t)
    start = time.perf_counter()
    for batch in batches:
        logs = step(batch)
    float(logs["loss"]) if "loss" in logs else None  # wait for the last step
    seconds = time.perf_counter() - start
    if record:
        st = stats[name]
        st["examples"] += examples
        st["seconds"] += seconds
        st["flops"] += flops
        st["eps"].append(examples / seconds)
    return examples / seconds


def _run_rounds(programs, config, args):
    """Warms every program up, then times them in interleaved rounds.

    Returns:
        `{name: {"examples", "seconds", "flops", "eps"}}` of the timed blocks.
    """
    stats = {
        name: {"examples": 0, "seconds": 0.0, "flops": 0.0, "eps": []}
        for name in programs
    }
    names = list(programs)
    for name in names:
        start = time.perf_counter()
        _run_block(programs, stats, config, name, args.warmup, record=False)
        print(
            f"# warmup {name}: {args.warmup} steps "
            f"in {time.perf_counter() - start:.1f} s",
            flush=True,
        )
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        line = []
        for name in order:
            eps = _run_block(programs, stats, config, name, args.block)
            line.append(f"{name} {eps:.1f} ex/s")
        print(f"round {r}: " + ", ".join(line), flush=True)
    return stats


def _print_table(stats, peaks, args):
    """Prints the results table: throughput, ratio, GFLOP/s and peak shares."""
    from benchmarks import common

    rows = []
    for name in stats:
        st = stats[name]
        eps = common.median(st["eps"])
        achieved = st["flops"] / st["seconds"]
        ratio = (
            common.median(
                a / b for a, b in zip(st["eps"], stats["reference"]["eps"], strict=True)
            )
            if "reference" in stats
            else float("nan")
        )
        rows.append(
            [
                name,
                eps,
                ratio,
                achieved / 1e9,
                f"{100e-9 * achieved / peaks['fp32']:.1f}% / "
                f"{100e-9 * achieved / peaks['bf16']:.1f}%",
                st["examples"] // (args.block * args.rounds) if st["eps"] else 0,
            ]
        )
    print()
    print(
        common.markdown_table(
            [
                "program",
                "examples/s (median)",
                "ratio vs reference",
                "matmul GFLOP/s",
                "of fp32 / bf16 peak",
                "mean batch",
            ],
            rows,
        )
    )


def main(argv=None):
    args = parse_args(argv)
    # All imported before the machine info, which lists the versions of the
    # libraries loaded, and so that a broken install fails before any output.
    import keras  # noqa: F401
    import tensorflow  # noqa: F401

    from benchmarks import common
    from benchmarks.flops import machine_peaks, training_flops  # noqa: F401
    from models import data  # noqa: F401
    from models.settings.data import DataSource
    from models.settings.fit import TrainOptions  # noqa: F401
    from models.settings.model import SummarizerConfig  # noqa: F401
    from models.text.features import TextFeatures  # noqa: F401

    common.print_machine_info()
    peaks = machine_peaks()
    print(
        f"# matmul peak, 2048^3, this run: fp32 {peaks['fp32']:.0f} GFLOP/s, "
        f"bf16 {peaks['bf16']:.0f} GFLOP/s"
    )
    rss_start = common.peak_rss_mib()
    source = DataSource(data_dir=args.data_dir, tfds_dir=args.tfds_dir)
    split = data.load_split("train", source)
    split = split.take(args.examples)
    config, features, options = _config_and_features(args, split)
    print(f"# config {json.dumps(config.to_dict())}")
    print(
        f"# {args.examples} examples, batch {args.batch_size}, blocks of {args.block} "
        f"steps x {args.rounds} rounds, warmup {args.warmup}"
    )
    encoded = data.encode_dataset(split, features).cache()
    reference_ds, max_s, max_t = _reference_dataset(
        encoded, args.batch_size, config.vocab_size
    )
    print(f"# reference pads to the dataset's longest: source {max_s}, target {max_t}")
    programs = _programs(args, config, options, encoded, reference_ds)
    stats = _run_rounds(programs, config, args)
    _print_table(stats, peaks, args)
    print(f"# peak RSS {common.peak_rss_mib():.0f} MiB (at start {rss_start:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
