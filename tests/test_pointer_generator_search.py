"""The search over a pointer-generator's decoding step
(`keras_attn.pointer_generator_log_distribution`): the step computes the
log-probabilities over the extended vocabulary, the search applies the
processors and chooses, as a step-by-step numpy loop does, on every backend.

The toy pointer-generator's logits, switch and attention depend on the
previous token; sources repeat words and hold OOVs (extended ids), so copy
mass adds up and OOV slots are chosen.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka
from keras_attn.search.processors import IdShift

BACKEND = keras.backend.backend()
V, S, OOV, END, MAX_LENGTH = 12, 6, 4, 1, 7
_DROPS = {"tensorflow": [True, "halves"], "torch": [True, "halves"], "jax": ["halves"]}


def make_source(rng, batch):
    ids = rng.integers(2, V + OOV, (batch, S)).astype("int32")
    ids[:, 1] = ids[:, 0]  # a repeated word: its copy mass adds up
    return ids


def make_step(source_ids, seed=0):
    """`step(ids, state)` of a toy pointer-generator over `source_ids`."""
    rng = np.random.default_rng(seed)
    logit_table = rng.normal(0.0, 2.0, (V + OOV, V)).astype("float32")
    score_table = rng.normal(0.0, 2.0, (V + OOV, S)).astype("float32")
    gate_table = rng.uniform(0.05, 0.95, (V + OOV, 1)).astype("float32")

    def step(ids, state):
        rows = state["rows"]
        logits = ops.take(logit_table, ids, axis=0)
        attention = ops.softmax(ops.take(score_table, ids, axis=0), axis=-1)
        p_gen = ops.take(gate_table, ids, axis=0)
        source = ops.take(ops.convert_to_tensor(source_ids), rows, axis=0)
        log_probs = ka.pointer_generator_log_distribution(
            p_gen, logits, attention, source, num_oov=OOV
        )
        return log_probs, state

    return step


def greedy(source_ids, **kwargs):
    batch = source_ids.shape[0]
    state = {"rows": ops.arange(batch, dtype="int32")}
    start = ops.zeros((batch,), "int32")
    result = ka.greedy_search(
        make_step(source_ids), state, start, END, MAX_LENGTH, **kwargs
    )
    return {
        k: ops.convert_to_numpy(getattr(result, k))
        for k in ("ids", "lengths", "scores")
    }


def reference_greedy(source_ids, processors):
    """Greedy decoding written out in numpy: each processor in turn, then the
    first of each row's largest totals; an ended row continues with `END`
    for free, and the loop stops once every row has ended (or is at -inf)."""
    batch = source_ids.shape[0]
    step = make_step(source_ids)
    state = {"rows": np.arange(batch, dtype="int32")}
    ids = np.zeros(batch, "int32")
    running = np.zeros(batch, "float32")
    finished = np.zeros(batch, bool)
    lengths = np.zeros(batch, "int32")
    history = np.full((batch, MAX_LENGTH), -1, "int32")
    for t in range(MAX_LENGTH):
        log_probs = ops.convert_to_numpy(step(ids, state)[0])
        for processor in processors:
            log_probs = ops.convert_to_numpy(processor(log_probs, history, t))
        total = running[:, None] + log_probs
        word = np.argmax(total, axis=1).astype("int32")
        best = total[np.arange(batch), word]
        word = np.where(finished, END, word)
        running = np.where(finished, running, best)
        lengths += ~finished & (word != END)
        finished |= word == END
        history[:, t] = ids = word
        if (finished | np.isinf(running)).all():
            break
    valid = np.arange(MAX_LENGTH)[None] < lengths[:, None]
    return {"ids": np.where(valid, history, END), "lengths": lengths, "scores": running}


def assert_same(result, expected):
    np.testing.assert_array_equal(result["ids"], expected["ids"])
    np.testing.assert_array_equal(result["lengths"], expected["lengths"])
    np.testing.assert_allclose(result["scores"], expected["scores"], rtol=1e-5)


def test_log_distribution_is_the_log_of_the_distribution():
    rng = np.random.default_rng(0)
    source = make_source(rng, 3)
    logits = rng.normal(size=(3, V)).astype("float32")
    attention = rng.dirichlet(np.ones(S), 3).astype("float32")
    p_gen = np.array([[0.2], [0.5], [0.9]], "float32")
    log_probs = ka.pointer_generator_log_distribution(
        p_gen, logits, attention, source, num_oov=OOV
    )
    probs = ka.pointer_generator_distribution(
        p_gen, logits, attention, source, num_oov=OOV, from_logits=True
    )
    log_probs = ops.convert_to_numpy(log_probs)
    np.testing.assert_allclose(
        np.exp(log_probs), ops.convert_to_numpy(probs), atol=1e-6
    )
    # By hand, row 0: the repeated word's two attention weights add up.
    word = source[0, 0]
    mass = attention[0][source[0] == word].sum()
    vocab = np.exp(logits[0]) / np.exp(logits[0]).sum() if word < V else np.zeros(V)
    share = vocab[word] if word < V else 0.0
    expected = np.log(0.2 * share + 0.8 * mass)
    np.testing.assert_allclose(log_probs[0, word], expected, rtol=1e-5)


class Shifts(IdShift):
    """Raises a source word, an OOV slot and a vocabulary word (negative
    amounts), so that shifted ids are chosen."""

    def __init__(self, source_ids):
        self.source_ids = source_ids

    def shifts(self, history, step, rows):
        word = ops.convert_to_tensor(self.source_ids[:, :1])
        fixed = ops.zeros((rows, 2), "int32") + np.array([[V + 3, 5]], "int32")
        amounts = np.array([[-2.5, -3.0, -1.5]], "float32")
        return ops.concatenate([word, fixed], axis=1), ops.zeros((rows, 3)) + amounts


@pytest.mark.parametrize(
    "constraints",
    [
        {"min_length": 3, "no_repeat_ngram_size": 1, "banned_ids": [0, 2]},
        {"no_repeat_ngram_size": 2, "min_length": 2},
    ],
)
def test_greedy_chooses_as_the_reference(constraints):
    # One batch of many rows: each search compiles its loop once (JAX).
    source = make_source(np.random.default_rng(0), 24)
    processors = [ka.MaxLength(6, END)]
    result = greedy(source, processors=processors, **constraints)
    expected = reference_greedy(
        source,
        [
            ka.MinLength(constraints["min_length"], END),
            *(
                [ka.BannedIds(constraints["banned_ids"])]
                if "banned_ids" in constraints
                else []
            ),
            ka.NoRepeatNgram(constraints["no_repeat_ngram_size"]),
            *processors,
        ],
    )
    assert_same(result, expected)
    # The toy model does copy OOV words (ids >= V): the test covers them.
    assert (result["ids"] >= V).any()


def test_shifts_are_chosen_as_the_reference():
    source = make_source(np.random.default_rng(6), 24)
    plain = greedy(source, processors=[ka.MaxLength(6, END)])
    processors = [ka.MaxLength(6, END), ka.EndPenalty(2.0, END)]
    result = greedy(source, processors=processors)
    assert_same(result, reference_greedy(source, processors))
    # The penalty lengthens headlines: it changed what was chosen.
    assert result["lengths"].sum() > plain["lengths"].sum()
    processors = [Shifts(source), ka.EndPenalty(1.0, END)]
    result = greedy(source, processors=processors)
    assert_same(result, reference_greedy(source, processors))
    # The raised ids are chosen: the source word, the OOV slot V + 3 where a
    # source holds it, and word 5.
    chosen = set(result["ids"].ravel().tolist())
    assert {5, V + 3} <= chosen and (source[:, 0] == result["ids"][:, 0]).any()


@pytest.mark.parametrize("drop_finished", _DROPS[BACKEND])
def test_dropping_rows_chooses_as_the_reference(drop_finished):
    source = make_source(np.random.default_rng(5), 8)
    processors = [ka.MaxLength(4, END)]
    result = greedy(
        source,
        no_repeat_ngram_size=1,
        processors=processors,
        drop_finished=drop_finished,
    )
    assert_same(result, reference_greedy(source, [ka.NoRepeatNgram(1), *processors]))
    assert result["lengths"].max() <= 4


def test_ties_and_banned_rows_choose_as_argmax():
    # Row 0: every logit equal and the attention on one position: ties among
    # vocabulary words and source words. Row 1: all words banned but the
    # OOV slots no source word holds (-inf everywhere): token 0.
    logits = np.zeros((2, V), "float32")
    attention = np.zeros((2, S), "float32")
    attention[:, 0] = 1.0
    source = np.array([[7, 3, 3, 9, 10, 11], [2, 3, 4, 5, 6, 7]], "int32")
    p_gen = np.array([[1.0], [0.5]], "float32")
    log_probs = ka.pointer_generator_log_distribution(
        p_gen, logits, attention, source, num_oov=OOV
    )

    def step(ids, state):
        return log_probs, state

    history = np.full((2, 1), -1, "int32")
    for processors in ([], [ka.BannedIds(list(range(V + OOV)))]):
        dense = ops.convert_to_numpy(log_probs)
        for p in processors:
            dense = ops.convert_to_numpy(p(dense, history, 0))
        expected = np.argmax(dense, axis=1)
        result = ka.greedy_search(
            step, None, np.zeros(2, "int32"), END, 1, processors=processors
        )
        ids = ops.convert_to_numpy(result.ids)[:, 0]
        np.testing.assert_array_equal(ids, np.where(expected == END, END, expected))
        np.testing.assert_array_equal(
            ops.convert_to_numpy(result.log_probs), dense[np.arange(2), expected]
        )
