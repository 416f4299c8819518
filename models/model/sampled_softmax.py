"""Sampled softmax: the target's vocabulary probability from a sample.

A step of the summarizer spends most of its time on the output layer: a
`(batch * T, dim) x (dim, vocab)` product and a softmax over the whole
vocabulary, for the probability of one word per step. Training can instead
score the target against `K` words drawn once per batch from a proposal `Q`
and estimate the partition function by importance sampling (Jean et al.
2015, "On Using Very Large Target Vocabulary for Neural Machine
Translation"):

    Z ~ exp(u_y) + sum_{k=1..K, s_k != y} exp(u_{s_k}) / (K Q(s_k))
    log P_vocab(y) ~ u_y - log Z

The estimate is a probability of the full vocabulary (not of a K-way
classification), so it mixes with the copy distribution as the exact one
does. `Q` is log-uniform (Zipfian), which suits a vocabulary sorted by
decreasing frequency. Decoding and evaluation always use the full softmax.
"""

import math

import keras
from keras import ops


def log_uniform_log_prob(ids, vocab_size):
    """`log Q(i)`, `Q(i) = log((i + 2) / (i + 1)) / log(vocab_size + 1)`."""
    ids = ops.cast(ids, "float32")
    return ops.log(ops.log((ids + 2.0) / (ids + 1.0)) / math.log(vocab_size + 1.0))


def log_uniform_candidates(num_sampled, vocab_size, seed=None):
    """`num_sampled` ids in `[0, vocab_size)`, drawn with replacement from Q.

    Returns:
        `(ids, log_q)`: int32 `(num_sampled,)` and their float32 `log Q`.
    """
    if num_sampled < 1 or vocab_size < 1:
        raise ValueError(
            "`num_sampled` and `vocab_size` must be >= 1. Received: "
            f"num_sampled={num_sampled}, vocab_size={vocab_size}"
        )
    # Inverse CDF: P(id < i) = log(i + 1) / log(V + 1).
    u = keras.random.uniform((num_sampled,), seed=seed)
    ids = ops.floor(ops.exp(u * math.log(vocab_size + 1.0))) - 1.0
    ids = ops.cast(ops.clip(ids, 0, vocab_size - 1), "int32")
    return ids, log_uniform_log_prob(ids, vocab_size)


def sampled_log_softmax(features, rows, bias, target_ids, sampled_ids, sampled_log_q):
    """Estimated `log softmax(features @ rows^T + bias)` at `target_ids`.

    Args and shapes: as `sampled_log_partition`: its target logit less its
    log partition function.
    """
    true_logits, log_z = sampled_log_partition(
        features, rows, bias, target_ids, sampled_ids, sampled_log_q
    )
    return true_logits - log_z


def sampled_log_partition(features, rows, bias, target_ids, sampled_ids, sampled_log_q):
    """The target's logit and the estimated log partition function.

    Args:
        features: `(..., dim)`: the inputs of the output layer.
        rows: `(vocab, dim)`: the output layer's weights, one row per word.
        bias: `(vocab,)` or `None`.
        target_ids: int `(...)` in `[0, vocab)`.
        sampled_ids: int `(K,)`, shared by every position.
        sampled_log_q: `(K,)`: `log Q` of `sampled_ids`.

    Returns:
        `(true_logits, log_z)`, float32 `(...)` each: the logit at
        `target_ids`, and the estimate of `log sum exp` over the vocabulary.
    """
    features = ops.cast(features, "float32")
    rows = ops.cast(rows, "float32")
    target_ids = ops.cast(target_ids, "int32")
    sampled_ids = ops.cast(sampled_ids, "int32")
    sampled_log_q = ops.cast(sampled_log_q, "float32")
    true_logits = ops.sum(features * ops.take(rows, target_ids, axis=0), axis=-1)
    sampled_logits = ops.matmul(
        features, ops.transpose(ops.take(rows, sampled_ids, axis=0))
    )
    if bias is not None:
        bias = ops.cast(bias, "float32")
        true_logits = true_logits + ops.take(bias, target_ids)
        sampled_logits = sampled_logits + ops.take(bias, sampled_ids)
    # log(K Q(s)): the expected count of s among the K samples.
    num_sampled = ops.cast(ops.shape(sampled_ids)[0], "float32")
    weighted = sampled_logits - (sampled_log_q + ops.log(num_sampled))
    # A sample of the target itself is already counted by exp(u_y).
    hit = ops.equal(ops.expand_dims(target_ids, -1), sampled_ids)
    weighted = ops.where(hit, -1e9, weighted)
    log_z = ops.logsumexp(
        ops.concatenate([ops.expand_dims(true_logits, -1), weighted], axis=-1), axis=-1
    )
    return true_logits, log_z
