"""Counting the work: exact FLOPs of the summarizer, and the machine's peak.

A figure in headlines/s only holds on the machine that measured it. Achieved
GFLOP/s beside the machine's own matmul peak, measured in the same run, is a
ratio that holds on any machine: how much of what the cores can do the
program gets.

The count is exact for the matrix products, from the configuration and the
actual lengths of the batch; it counts one multiply-add as 2 FLOPs, as the
peak does. With E the embedding size, H the hidden size (u = H/2 per encoder
direction), A the attention units, V the vocabulary, g = 4 gates for an LSTM
and 3 for a GRU, and a source of S tokens:

    encoder, per source token   2 * 2 * g*u*(E + u)        both directions
                              + (L - 1) * 2 * 2 * g*u*(H + u)   L stacked layers
    encoder, once per source    2 * H*H                     bridge
                              + 2 * S * H*A                 keys, W1 k (additive)
    decoder, per step           2 * g*H*(E + H)             the cell
                              + 2 * (H*A + S*A)             query W2 q, score v.tanh()
                              + 2 * S*H                     context
                              + 2 * 2H*H                    attentional layer
                              + 2 * (H*E + E*V)             output, tied (untied: H*V)
                              + 2 * (2H + E)                copy switch p_gen

For dot and general scores the query/key terms change (see
`attention_flops`). A decoded headline of n tokens takes n + 1 steps (the end
token is a step too); a beam runs every step for each of its k rows.

A training step (`training_flops`) runs the same products over the padded
batch, the decoder teacher-forced over the T target positions, and its
output layer over the K sampled words and the target (V = K + 1) when it
samples the softmax; backpropagation doubles every product (the gradients
for its input and for its weights are products of the same size):

    training step    3 * batch * (encoder(S) + T * decoder step(S))
Element-wise work (gate nonlinearities, tanh of the additive score, the
log-softmax over V, the copy mixture) is a few operations per element and is
left out: it is memory-bound, and the point of the ratio is how close the
matrix products come to the matmul peak.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence


def _gates(config) -> int:
    return 4 if config.cell == "lstm" else 3


def attention_flops(config, source_length: int) -> tuple[int, int]:
    """`(per_source, per_step)` FLOPs of the attention for one row."""
    h, a, s = config.hidden_size, config.attention_units, source_length
    kind = config.attention
    if kind.startswith("bahdanau") or config.coverage:
        return 2 * s * h * a, 2 * (h * a + s * a)
    if kind == "luong-concat":
        return 2 * s * h * a, 2 * (h * a + s * a)
    if kind == "luong-general":
        # The query is projected at each step, q^T W, then dotted with keys.
        return 0, 2 * (h * h + s * h)
    # dot, scale, scaled-dot
    return 0, 2 * s * h


def encoder_flops(config, source_length: int) -> int:
    """FLOPs to encode one source of `source_length` tokens, memory included."""
    u, e, h = config.hidden_size // 2, config.embedding_dim, config.hidden_size
    per_token = 2 * 2 * _gates(config) * u * (e + u)
    # Layers above the first take the layer below's `H` outputs.
    per_token += (config.encoder_layers - 1) * 2 * 2 * _gates(config) * u * (h + u)
    per_source, _ = attention_flops(config, source_length)
    return source_length * per_token + 2 * h * h + per_source


def step_flops(config, source_length: int, shortlist: int = 0) -> int:
    """FLOPs of one decoder step for one row (one hypothesis).

    `shortlist`: an export that scores only the `shortlist` most frequent
    words and the source's (`SearchOptions.shortlist`) has `V = shortlist +
    source_length` output columns (at most the vocabulary).
    """
    e, h, v = config.embedding_dim, config.hidden_size, config.vocab_size
    if shortlist:
        v = min(v, shortlist + source_length)
    _, attention = attention_flops(config, source_length)
    output = 2 * (h * e + e * v) if config.tie_embeddings else 2 * h * v
    copy = 2 * (2 * h + e) if config.copy else 0
    return (
        2 * _gates(config) * h * (e + h)
        + attention
        + 2 * source_length * h  # context
        + 2 * 2 * h * h  # attentional layer
        + output
        + copy
    )


def search_flops(
    config,
    source_lengths: Sequence[int],
    steps: Sequence[int],
    beam_size: int = 1,
    shortlist: int = 0,
) -> dict[str, int]:
    """FLOPs of decoding a batch.

    Args:
        config: the run's `SummarizerConfig`.
        source_lengths: tokens of each source (after truncation).
        steps: decoder steps each row ran (headline tokens + 1 for the end
            token, or the step limit). For a beam: the steps of the search.
        beam_size: rows per source in the decoder.
        shortlist: as in `step_flops`.

    Returns:
        dict of `encoder`, `decoder` and `total` FLOPs.
    """
    if len(source_lengths) != len(steps):
        raise ValueError(
            "`source_lengths` and `steps` must have one entry per row. Received: "
            f"len(source_lengths)={len(source_lengths)}, len(steps)={len(steps)}"
        )
    encoder = sum(encoder_flops(config, s) for s in source_lengths)
    decoder = sum(
        beam_size * n * step_flops(config, s, shortlist)
        for s, n in zip(source_lengths, steps, strict=True)
    )
    return {"encoder": encoder, "decoder": decoder, "total": encoder + decoder}


def training_flops(config, batch: int, source_length: int, target_length: int) -> int:
    """FLOPs of one training step (forward and backward) on a padded batch.

    Args:
        config: the model's `SummarizerConfig` (its `sampled_softmax`, if
            below the vocabulary, sizes the output layer).
        batch: rows of the batch.
        source_length, target_length: its padded lengths, which every row
            runs (masking does not skip the products).
    """
    if 0 < config.sampled_softmax < config.vocab_size:
        config = dataclasses.replace(config, vocab_size=config.sampled_softmax + 1)
    forward = encoder_flops(config, source_length) + target_length * step_flops(
        config, source_length
    )
    return 3 * batch * forward


def matmul_peak_gflops(dtype: str = "float32", n: int = 2048, seconds=2.0) -> float:
    """The best GFLOP/s of an `n x n x n` TensorFlow matmul over ~`seconds`."""
    import tensorflow as tf

    a = tf.random.normal([n, n], dtype="float32")
    a = tf.cast(a, dtype)
    b = tf.cast(tf.random.normal([n, n], dtype="float32"), dtype)
    matmul = tf.function(lambda x, y: tf.matmul(x, y))
    matmul(a, b).numpy()  # trace, warm the caches
    best = float("inf")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        matmul(a, b).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def machine_peaks() -> dict[str, float]:
    """fp32 and bf16 matmul peaks of this machine, GFLOP/s, measured now."""
    return {
        "fp32": matmul_peak_gflops("float32"),
        "bf16": matmul_peak_gflops("bfloat16"),
    }
