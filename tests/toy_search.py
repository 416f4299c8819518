"""The toy model the search tests decode, and its brute-force answers.

Its log-probs depend on the last two tokens and a hash of the whole prefix,
so a search that fails to reorder its state decodes wrong; its extras
`[prev2, prev1, hash % 13, step]` identify the hypothesis and step. Shared
by tests/test_search.py and tests/test_search_compiled.py.
"""

import itertools

import keras
import numpy as np
from keras import ops

from keras_attn.search.strategies import DecodingResult

BACKEND = keras.backend.backend()
V, END = 5, 1
HASH_MOD, HASH_ROWS = 9973, 13
# The dropping modes each backend runs: JAX's loops keep fixed shapes.
DROP_MODES = {
    "tensorflow": [True, "halves"],
    "torch": [True, "halves"],
    "jax": ["halves"],
}


def make_tables(seed=0, vocab=V):
    rng = np.random.default_rng(seed)
    bigram = rng.normal(0.0, 2.0, (vocab, vocab, vocab)).astype("float32")
    by_prefix = rng.normal(0.0, 1.0, (HASH_ROWS, vocab)).astype("float32")
    return bigram, by_prefix


def make_step(bigram, by_prefix, extras=True):
    """`step(ids, state)` of the toy model (see the module docstring)."""

    def step(ids, state):
        vocab = ops.shape(bigram)[-1]
        prev2, prefix_hash, t = state["prev2"], state["hash"], state["t"]
        new_hash = (prefix_hash * 7 + ids + 1) % HASH_MOD
        flat = ops.reshape(bigram, (-1, vocab))
        logits = ops.take(flat, prev2 * vocab + ids, axis=0) + ops.take(
            by_prefix, new_hash % HASH_ROWS, axis=0
        )
        new_state = {"prev2": ids, "hash": new_hash, "t": t + 1}
        log_probs = ops.log_softmax(logits, axis=-1)
        if not extras:
            return log_probs, new_state
        record = ops.cast(
            ops.stack([prev2, ids, new_hash % HASH_ROWS, t], -1), "float32"
        )
        return log_probs, new_state, record

    return step


def initial_state(start_ids):
    start_ids = ops.convert_to_tensor(start_ids, "int32")
    zeros = ops.zeros_like(start_ids)
    return {"prev2": start_ids, "hash": zeros, "t": zeros}


def np_step(bigram, by_prefix, prev2, prev1, prefix_hash):
    new_hash = (prefix_hash * 7 + prev1 + 1) % HASH_MOD
    logits = (bigram[prev2, prev1] + by_prefix[new_hash % HASH_ROWS]).astype("float64")
    logits = logits - logits.max()
    return logits - np.log(np.exp(logits).sum()), new_hash


def has_repeated_ngram(tokens, n):
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


def brute_force(tables, start, max_length, min_length=0, banned=(), ngram=0, alpha=0.0):
    """Best `(tokens, log_prob, score)` over every admissible sequence."""
    ranked = ranked_sequences(
        tables, start, max_length, min_length, banned, ngram, alpha
    )
    return ranked[0]


def ranked_sequences(
    tables, start, max_length, min_length=0, banned=(), ngram=0, alpha=0.0
):
    """Every admissible `(tokens, log_prob, score)`, the best first."""
    bigram, by_prefix = tables
    every = []
    for length in range(1, max_length + 1):
        for seq in itertools.product(range(bigram.shape[-1]), repeat=length):
            ended = seq[-1] == END
            if END in seq[:-1] or (length < max_length and not ended):
                continue
            if any(t in banned for t in seq) or (ended and length - 1 < min_length):
                continue
            if ngram and has_repeated_ngram(seq, ngram):
                continue
            prev2, prev1, h, total = start, start, 0, 0.0
            for token in seq:
                log_probs, h = np_step(bigram, by_prefix, prev2, prev1, h)
                total += log_probs[token]
                prev2, prev1 = prev1, token
            score = total / ((5.0 + length) / 6.0) ** alpha
            every.append((list(seq), total, score))
    return sorted(every, key=lambda x: -x[2])


def np_result(result):
    return DecodingResult(
        *(None if x is None else ops.convert_to_numpy(x) for x in result)
    )


def unpad(result, b):
    """Tokens of example `b` up to and including the end token."""
    length = int(result.lengths[b])
    ids = result.ids[b]
    return list(ids[: length + 1]) if length < ids.shape[0] else list(ids)


def check_extras(result, starts):
    """The extras rows describe the chosen hypothesis, then zeros."""
    for b, start in enumerate(starts):
        seq = [start, start] + list(result.ids[b])
        h = 0
        for t in range(result.ids.shape[1]):
            h = (h * 7 + seq[t + 1] + 1) % HASH_MOD
            expected = [seq[t], seq[t + 1], h % HASH_ROWS, t]
            if t >= result.lengths[b]:
                expected = [0, 0, 0, 0]
            np.testing.assert_allclose(
                result.extras[b, t], expected, err_msg=f"{b},{t}"
            )


def assert_same(a, b):
    """Two dicts of the same keys hold the same numbers."""
    for key in a:
        if a[key] is None:
            assert b[key] is None, key
            continue
        np.testing.assert_allclose(
            ops.convert_to_numpy(a[key]),
            ops.convert_to_numpy(b[key]),
            rtol=1e-5,
            atol=1e-6,
            err_msg=key,
        )
