"""A greedy step's choice from the scores in parts against written out.

`keras_attn.greedy_search` chooses from a pointer-generator's
`PointerScores` without writing them out over the extended vocabulary
(`keras_attn.pointer_scores.greedy_choice`): passes over `(N, V)` for the
partition function and the banned logits' maximum, the rest over the `S`
source words. Written out (`pointer_log_distribution`, what beam search and
sampling use), the step passes over `(N, V + OOV)` for the distribution,
each processor's bans and the maximum.

Both apply the greedy export's constraints at step `t`: `</s>` banned before
`min_length` and no repeated word, from a history of the `t` first source
words. The script checks that the two choose the same tokens with the same
log-probabilities on the first test batch and on perturbed logits, then
times both compiled by XLA in a loop (`xla_pieces.ms_per_iteration`) and on
TensorFlow's executor (a `tf.function`).

    python benchmarks/greedy_choice.py --run-dir runs/headlines_ema1 \\
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
    p.add_argument("--step", type=int, default=2, help="the step t chosen at")
    p.add_argument("--repeats", type=int, default=20)
    return p.parse_args(argv)


def _processors(end_id, min_length):
    from keras_attn.processors import MinLength, NoRepeatNgram

    return [MinLength(min_length, end_id), NoRepeatNgram(1)]


def dense_choice(
    logits, p_gen, weights, ext_ids, num_oov, history, t, end_id, min_length
):
    """Written out: the distribution, the processors, the first maximum."""
    import tensorflow as tf

    from keras_attn.pointer import pointer_log_distribution
    from keras_attn.search_loop import argmax_first

    log_probs = pointer_log_distribution(p_gen, logits, weights, ext_ids, num_oov)
    for processor in _processors(end_id, min_length):
        log_probs = processor(log_probs, history, t)
    ids = argmax_first(log_probs, t)[:, 0]
    return ids, tf.gather(log_probs, ids, batch_dims=1)


def parts_choice(
    logits, p_gen, weights, ext_ids, num_oov, history, t, end_id, min_length
):
    """From `PointerScores`, as the greedy search does."""
    from keras_attn.pointer import pointer_scores
    from keras_attn.pointer_scores import greedy_choice

    scores = pointer_scores(p_gen, logits, weights, ext_ids, num_oov)
    return greedy_choice(scores, _processors(end_id, min_length), history, t)


def main(argv=None):
    args = parse_args(argv)
    import numpy as np
    import tensorflow as tf
    from common import machine_info
    from profile_greedy import one_step
    from xla_pieces import median_ms, ms_per_iteration

    from models.features import END_ID
    from models.runs import load_run, load_trained_model

    _, features = load_run(args.run_dir)
    model = load_trained_model(args.run_dir)
    lines = (Path(args.data_dir) / "org_data" / "test.src.txt").read_text()
    docs = tf.constant(lines.splitlines()[: args.batch])
    source = features.encode_source(docs)
    ids, ext_ids = source["ids"], source["ext_ids"]
    step = one_step(model, ids, ext_ids)
    logits, p_gen, weights = step["logits"], step["p_gen"], step["weights"]
    # A history of `t` earlier tokens per row: source words (which the copy
    # favours, so the bans bind), -1 after.
    t, width = args.step, model.config.max_target_length
    history = np.full((args.batch, width), -1, "int32")
    history[:, :t] = ext_ids.numpy()[:, :t]
    history = tf.constant(history)
    # The export's OOV slots: one per source position it keeps.
    num_oov = model.config.max_source_length
    common = (p_gen, weights, ext_ids, num_oov, history, tf.constant(t), END_ID, 3)

    rng = np.random.default_rng(0)
    for trial in range(20):
        noisy = logits + tf.constant(
            rng.normal(0, trial * 0.5, logits.shape), tf.float32
        )
        dense_ids, dense_scores = dense_choice(noisy, *common)
        ids_, scores = parts_choice(noisy, *common)
        assert bool(tf.reduce_all(dense_ids == ids_)), trial
        np.testing.assert_array_equal(scores.numpy(), dense_scores.numpy())
    print("same tokens and log-probabilities on 20 trials")

    print(machine_info())
    print(f"batch {args.batch}, source length {int(ids.shape[1])}, step {t}")
    for name, choose in (("written out", dense_choice), ("in parts", parts_choice)):
        compiled = ms_per_iteration(
            lambda d, c=choose: c(logits + d, *common)[1], args.repeats
        )
        graph = tf.function(lambda x, c=choose: c(x, *common)[1])
        executor = median_ms(lambda g=graph: g(logits).numpy(), args.repeats)
        print(f"| {name} | XLA {compiled:.3f} ms | executor {executor:.3f} ms |")


if __name__ == "__main__":
    main()
