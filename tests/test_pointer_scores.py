"""keras_attn.pointer_parts: greedy search from a pointer-generator's scores
in parts (`PointerScores.argmax`) chooses what it chooses from them written
out (`log_probs()`), on every backend.

The toy pointer-generator's logits, switch and attention depend on the
previous token; sources repeat words and hold OOVs (extended ids), so copy
mass adds up and OOV slots are chosen.
"""

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka

BACKEND = keras.backend.backend()
V, S, OOV, END = 12, 6, 4, 1
_DROPS = {"tensorflow": [True, "halves"], "torch": [True, "halves"], "jax": ["halves"]}


def make_source(rng, batch):
    ids = rng.integers(2, V + OOV, (batch, S)).astype("int32")
    ids[:, 1] = ids[:, 0]  # a repeated word: its copy mass adds up
    return ids


def make_step(source_ids, seed=0, parts=True):
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
        scores = ka.pointer_scores(p_gen, logits, attention, source, num_oov=OOV)
        return (scores if parts else scores.log_probs()), state

    return step


def search_one(search, source_ids, parts, **kwargs):
    """`search` over the toy model's scores in parts, or written out."""
    batch = source_ids.shape[0]
    state = {"rows": ops.arange(batch, dtype="int32")}
    start = ops.zeros((batch,), "int32")
    step = make_step(source_ids, parts=parts)
    return search(step, state, start, END, 7, **kwargs)


def search_both(search, source_ids, **kwargs):
    results = [search_one(search, source_ids, p, **kwargs) for p in (True, False)]
    return [
        {k: ops.convert_to_numpy(getattr(r, k)) for k in ("ids", "lengths", "scores")}
        for r in results
    ]


def assert_same(parts, dense):
    np.testing.assert_array_equal(parts["ids"], dense["ids"])
    np.testing.assert_array_equal(parts["lengths"], dense["lengths"])
    # The same sums of the same float32 values, in the same order.
    np.testing.assert_array_equal(parts["scores"], dense["scores"])


def test_dense_is_the_pointer_distribution():
    rng = np.random.default_rng(0)
    source = make_source(rng, 3)
    logits = rng.normal(size=(3, V)).astype("float32")
    attention = rng.dirichlet(np.ones(S), 3).astype("float32")
    p_gen = np.array([[0.2], [0.5], [0.9]], "float32")
    scores = ka.pointer_scores(p_gen, logits, attention, source, num_oov=OOV)
    probs = ka.pointer_distribution(
        p_gen, logits, attention, source, num_oov=OOV, from_logits=True
    )
    dense = ops.convert_to_numpy(scores.dense())
    np.testing.assert_allclose(np.exp(dense), ops.convert_to_numpy(probs), atol=1e-6)
    # By hand, row 0: the repeated word's two attention weights add up.
    word = source[0, 0]
    mass = attention[0][source[0] == word].sum()
    vocab = np.exp(logits[0]) / np.exp(logits[0]).sum() if word < V else np.zeros(V)
    share = vocab[word] if word < V else 0.0
    expected = np.log(0.2 * share + 0.8 * mass)
    np.testing.assert_allclose(dense[0, word], expected, rtol=1e-5)


@pytest.mark.parametrize(
    "constraints",
    [
        {"min_length": 3, "no_repeat_ngram_size": 1, "banned_ids": [0, 2]},
        {"no_repeat_ngram_size": 2, "min_length": 2},
    ],
)
def test_greedy_from_parts_equals_greedy_written_out(constraints):
    widths = []

    class Recording(ka.MaxLength):  # the width of the scores it bans in
        def __call__(self, log_probs, history, step):
            widths.append(log_probs.shape[1])
            return super().__call__(log_probs, history, step)

    # One batch of many rows: each search compiles its loop once (JAX).
    source = make_source(np.random.default_rng(0), 24)
    parts, dense = search_both(
        ka.greedy_search, source, processors=[Recording(99, END)], **constraints
    )
    assert_same(parts, dense)
    # From the parts, the processors ban in the logits (V columns).
    assert set(widths) == {V, V + OOV}
    # The toy model does copy OOV words (ids >= V): the test covers them.
    assert (parts["ids"] >= V).any()


class CountsWrittenOut:
    """A processor mixin that records the width of the scores it is called on
    (only written-out scores call it)."""

    def __call__(self, log_probs, history, step):
        self.calls.append(log_probs.shape[1])
        return super().__call__(log_probs, history, step)


class Shifts(CountsWrittenOut, ka.IdShift):
    """Raises a source word, an OOV slot and a vocabulary word (negative
    amounts), so that shifted ids are chosen."""

    def __init__(self, source_ids, calls):
        self.source_ids, self.calls = source_ids, calls

    def shifts(self, history, step, rows):
        word = ops.convert_to_tensor(self.source_ids[:, :1])
        fixed = ops.zeros((rows, 2), "int32") + np.array([[V + 3, 5]], "int32")
        amounts = np.array([[-2.5, -3.0, -1.5]], "float32")
        return ops.concatenate([word, fixed], axis=1), ops.zeros((rows, 3)) + amounts


class CountedEndPenalty(CountsWrittenOut, ka.EndPenalty):
    def __init__(self, penalty, calls):
        super().__init__(penalty, END)
        self.calls = calls


def greedy_from_parts(source_ids, processors):
    return search_one(ka.greedy_search, source_ids, True, processors=processors)


def test_shifts_are_chosen_from_parts_as_written_out():
    source = make_source(np.random.default_rng(6), 24)
    plain, _ = search_both(ka.greedy_search, source, processors=[ka.MaxLength(6, END)])
    calls = []
    processors = [ka.MaxLength(6, END), CountedEndPenalty(2.0, calls)]
    greedy_from_parts(source, processors)
    assert calls == []  # from the parts, nothing is written out
    parts, dense = search_both(ka.greedy_search, source, processors=processors)
    assert_same(parts, dense)
    assert set(calls) == {V + OOV}
    # The penalty lengthens headlines: it changed what was chosen.
    assert parts["lengths"].sum() > plain["lengths"].sum()
    calls.clear()
    processors = [Shifts(source, calls), ka.EndPenalty(1.0, END)]
    greedy_from_parts(source, processors)
    assert calls == []
    parts, dense = search_both(ka.greedy_search, source, processors=processors)
    assert_same(parts, dense)
    # The raised ids are chosen: the source word, the OOV slot V + 3 where a
    # source holds it, and word 5.
    chosen = set(parts["ids"].ravel().tolist())
    assert {5, V + 3} <= chosen and (source[:, 0] == parts["ids"][:, 0]).any()


@pytest.mark.parametrize("drop_finished", _DROPS[BACKEND])
def test_dropping_rows_from_parts(drop_finished):
    source = make_source(np.random.default_rng(5), 8)
    parts, dense = search_both(
        ka.greedy_search,
        source,
        no_repeat_ngram_size=1,
        processors=[ka.MaxLength(4, END)],
        drop_finished=drop_finished,
    )
    assert_same(parts, dense)
    assert parts["lengths"].max() <= 4


def test_ties_and_banned_rows_choose_as_argmax():
    # Row 0: every logit equal and no attention mass on the repeated word's
    # rival: ties among vocabulary words and source words. Row 1: all
    # words banned but the OOV slots no source word holds (-inf everywhere).
    logits = np.zeros((2, V), "float32")
    attention = np.zeros((2, S), "float32")
    attention[:, 0] = 1.0
    source = np.array([[7, 3, 3, 9, 10, 11], [2, 3, 4, 5, 6, 7]], "int32")
    p_gen = np.array([[1.0], [0.5]], "float32")
    scores = ka.pointer_scores(p_gen, logits, attention, source, num_oov=OOV)
    history = np.full((2, 4), -1, "int32")
    banned = ka.BannedIds(list(range(V + OOV)))
    for processors in ([], [banned]):
        dense = scores.dense()
        for p in processors:
            dense = p(dense, history, 0)
        expected = np.argmax(ops.convert_to_numpy(dense), axis=1)
        running = ops.zeros((2,), "float32")
        ids, log_probs = scores.argmax(processors, history, 0, running)
        np.testing.assert_array_equal(ops.convert_to_numpy(ids), expected)
        np.testing.assert_array_equal(
            ops.convert_to_numpy(log_probs),
            ops.convert_to_numpy(dense)[np.arange(2), expected],
        )


def test_a_processor_without_banned_writes_the_scores_out():
    seen = []

    class Spy:  # a user's processor: a plain callable
        def __call__(self, log_probs, history, step):
            seen.append(log_probs.shape[1])
            return log_probs

    source = make_source(np.random.default_rng(2), 4)
    parts, dense = search_both(ka.greedy_search, source, processors=[Spy()])
    assert_same(parts, dense)
    assert set(seen) == {V + OOV}


def test_beam_and_sampling_write_the_scores_out():
    source = make_source(np.random.default_rng(3), 4)
    parts, dense = search_both(ka.beam_search, source, beam_size=3, length_penalty=1.0)
    assert_same(parts, dense)
    parts, dense = search_both(ka.sampling_search, source, seed=4)
    assert_same(parts, dense)


def test_processors_ban_the_same_ids_both_ways():
    history = np.array([[4, 5, 4, -1, -1], [2, 2, -1, -1, -1]], "int32")
    columns = np.arange(V + OOV, dtype="int32")[None]
    zeros = np.zeros((2, V + OOV), "float32")
    for processor in (
        ka.MinLength(4, END),
        ka.MaxLength(2, END),
        ka.BannedIds([3, V + 1]),
        ka.NoRepeatNgram(1),
        ka.NoRepeatNgram(2),
    ):
        for step in (2, 3):
            written = np.isinf(ops.convert_to_numpy(processor(zeros, history, step)))
            ids = np.broadcast_to(columns, (2, V + OOV))
            said = ops.convert_to_numpy(processor.banned(ids, history, step))
            np.testing.assert_array_equal(said, written, err_msg=repr(processor))


def test_no_repeat_ignores_followers_beyond_the_columns():
    # Token V + 2 (an OOV slot) was generated; scores over the vocabulary
    # alone have no column for it, and nothing else is banned.
    history = np.array([[V + 2, -1, -1]], "int32")
    out = ka.NoRepeatNgram(1)(np.zeros((1, V), "float32"), history, 1)
    assert not np.isinf(ops.convert_to_numpy(out)).any()
