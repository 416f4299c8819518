"""keras_attn.token_scores: the search asks a step's scores for `argmax`
(greedy) or `log_probs()` (beam, sampling) and knows no model; a tensor is
`DenseScores`. Numbers by hand."""

import numpy as np
from keras import ops

import keras_attn as ka

NEG = -np.inf
END = 1
HISTORY = np.full((2, 3), -1, "int32")


def numpy(*xs):
    return [ops.convert_to_numpy(x) for x in xs]


def test_argmax_first_takes_the_first_of_ties():
    scores = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], "float32")
    best, index = numpy(*ka.argmax_first(scores))
    np.testing.assert_array_equal(best, [[3.0], [2.0]])
    np.testing.assert_array_equal(index, [1, 0])
    # With ids: the smallest id among the maxima, wherever it stands.
    ids = np.array([[5, 9, 4], [7, 6, 1]], "int32")
    _, index = numpy(*ka.argmax_first(scores, ids))
    np.testing.assert_array_equal(index, [4, 6])


def test_dense_argmax_applies_the_processors_and_adds_the_running_score():
    log_probs = np.log(np.array([[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]], "float32"))
    running = ops.convert_to_tensor([-1.0, -2.0], "float32")
    scores = ka.DenseScores(log_probs)
    ids, totals = numpy(*scores.argmax([], HISTORY, 0, running))
    np.testing.assert_array_equal(ids, [0, 2])
    np.testing.assert_allclose(totals, [-1 + np.log(0.5), -2 + np.log(0.6)])
    ids, totals = numpy(*scores.argmax([ka.BannedIds([0, 2])], HISTORY, 0, running))
    np.testing.assert_array_equal(ids, [1, 1])
    np.testing.assert_allclose(totals, [-1 + np.log(0.3), -2 + np.log(0.2)])


class Factored(ka.TokenScores):
    """Scores of a toy model, `log p(w) = a_w + b` per row, kept in parts; its
    own `argmax` records that greedy search asked for it."""

    calls = []

    def __init__(self, logits, offset):
        self.logits, self.offset = logits, offset

    def log_probs(self):
        Factored.calls.append("log_probs")
        return self.logits + self.offset

    def argmax(self, processors, history, step, running):
        Factored.calls.append("argmax")
        return super().argmax(processors, history, step, running)


TABLE = np.log(
    np.array(
        [[0.1, 0.2, 0.3, 0.4], [0.25] * 4, [0.4, 0.3, 0.2, 0.1], [0.1, 0.6, 0.2, 0.1]],
        "float32",
    )
)


def step(parts):
    def step(ids, state):
        logits = ops.take(ops.convert_to_tensor(TABLE), ids, axis=0)
        if not parts:
            return logits, state
        zero = ops.zeros((ops.shape(ids)[0], 1))
        return Factored(logits, zero), state

    return step


def test_a_model_of_ones_own_decodes_as_its_dense_scores():
    starts = np.array([0, 2], "int32")
    for search, kwargs in [
        (ka.greedy_search, {}),
        (ka.beam_search, {"beam_size": 2}),
        (ka.sampling_search, {"seed": 3}),
    ]:
        Factored.calls.clear()
        parts = search(step(True), None, starts, END, 4, **kwargs)
        dense = search(step(False), None, starts, END, 4, **kwargs)
        for a, b in zip(numpy(*parts[:4]), numpy(*dense[:4]), strict=True):
            np.testing.assert_array_equal(a, b)
        # Only greedy search asks for `argmax` (whose default reads
        # `log_probs()`); the others write the scores out.
        assert ("argmax" in Factored.calls) == (search is ka.greedy_search)
        assert "log_probs" in Factored.calls
    # Greedy by hand: 0 -> 3 (0.4) -> 1 (0.6, the end token).
    greedy = ka.greedy_search(step(True), None, starts[:1], END, 4)
    ids, lengths, log_probs = numpy(greedy.ids, greedy.lengths, greedy.log_probs)
    np.testing.assert_array_equal(ids[0, :2], [3, 1])
    assert lengths[0] == 1
    np.testing.assert_allclose(log_probs, [np.log(0.4) + np.log(0.6)], rtol=1e-6)
