"""The searches' `stop_ids`, `from_logits` and the vocabulary check of the
end and stop ids, on a bigram table whose results are worked out by hand."""

import numpy as np
import pytest
from keras import ops
from one_line_errors import one_line

import keras_attn as ka

START, END = 1, 2
PROBS = np.array(
    [
        [0.2, 0.2, 0.2, 0.2, 0.2],
        [0.05, 0.05, 0.1, 0.5, 0.3],  # after START: 3, or 4
        [0.2, 0.2, 0.2, 0.2, 0.2],
        [0.05, 0.05, 0.3, 0.1, 0.5],  # after 3: 4, or END
        [0.05, 0.05, 0.7, 0.1, 0.1],  # after 4: END
    ],
    "float32",
)


def log_probs_step(ids, state):
    return ops.take(ops.log(ops.convert_to_tensor(PROBS)), ids, axis=0), state


def logits_step(ids, state):
    # log-probabilities shifted by a row's own constant: the same softmax.
    logits = np.log(PROBS) + np.arange(5, dtype="float32")[:, None] * 3.0 + 7.0
    return ops.take(ops.convert_to_tensor(logits), ids, axis=0), state


def starts(n=1):
    return np.full((n,), START, "int32")


def numpy(result):
    return {
        "ids": ops.convert_to_numpy(result.ids).tolist(),
        "lengths": ops.convert_to_numpy(result.lengths).tolist(),
        "log_probs": ops.convert_to_numpy(result.log_probs),
    }


def test_a_stop_id_ends_a_greedy_row_and_is_kept():
    # 3 is greedy's first token (0.5); as a stop id it ends the row there.
    out = numpy(ka.greedy_search(log_probs_step, None, starts(), END, 5, stop_ids=[3]))
    assert out["ids"] == [[3, END, END, END, END]]
    assert out["lengths"] == [0]
    np.testing.assert_allclose(out["log_probs"], [np.log(0.5)], rtol=1e-6)
    # Without it: 3, 4, END (0.5 * 0.5 * 0.7).
    out = numpy(ka.greedy_search(log_probs_step, None, starts(), END, 5))
    assert out["ids"] == [[3, 4, END, END, END]] and out["lengths"] == [2]


def test_a_stop_id_ends_beams_which_compete_on_their_scores():
    # "3 <stop>" (0.5) beats "4 END" (0.3 * 0.7 = 0.21).
    result = ka.beam_search(
        log_probs_step, None, starts(), END, 5, 2, num_hypotheses=2, stop_ids=3
    )
    out = numpy(result)
    assert out["ids"] == [[3, END, END, END, END], [4, END, END, END, END]]
    assert out["lengths"] == [0, 1]
    np.testing.assert_allclose(out["log_probs"], np.log([0.5, 0.21]), rtol=1e-5)


def test_min_length_bans_the_stop_ids_too():
    # Step 0 bans END and 3: 4 (0.3), then END (0.7).
    result = ka.greedy_search(
        log_probs_step, None, starts(), END, 5, stop_ids=[3], min_length=1
    )
    out = numpy(result)
    assert out["ids"] == [[4, END, END, END, END]] and out["lengths"] == [1]
    np.testing.assert_allclose(out["log_probs"], [np.log(0.3 * 0.7)], rtol=1e-5)


def test_a_stop_id_under_compilation(compiled):
    def search(start_ids):
        return ka.beam_search(log_probs_step, None, start_ids, END, 5, 2, stop_ids=[3])

    ids = compiled(lambda s: search(s).ids)(ops.convert_to_tensor(starts(2)))
    assert ops.convert_to_numpy(ids).tolist() == [[3, END, END, END, END]] * 2


@pytest.mark.parametrize(
    "search",
    [
        lambda step, **kw: ka.greedy_search(step, None, starts(3), END, 5, **kw),
        lambda step, **kw: ka.beam_search(step, None, starts(3), END, 5, 3, **kw),
        lambda step, **kw: ka.sampling_search(
            step, None, starts(3), END, 5, seed=3, **kw
        ),
    ],
    ids=["greedy", "beam", "sampling"],
)
def test_logits_and_log_probabilities_give_the_same_hypotheses(search):
    expected = numpy(search(log_probs_step))
    got = numpy(search(logits_step, from_logits=True))
    assert got["ids"] == expected["ids"] and got["lengths"] == expected["lengths"]
    np.testing.assert_allclose(got["log_probs"], expected["log_probs"], atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"end_id": 5},
            "`end_id` must be a token of the step's vocabulary, in [0, 5): "
            "outside it, no row would ever end. Received: end_id=5",
        ),
        (
            {"stop_ids": [3, 9]},
            "`stop_ids` must be a token of the step's vocabulary, in [0, 5): "
            "outside it, no row would ever end. Received: stop_ids=9",
        ),
        (
            {"stop_ids": "3"},
            "`stop_ids` must be a Python int >= 0 or a list of them. "
            "Received: stop_ids='3'",
        ),
        (
            {"from_logits": "yes"},
            "`from_logits` must be True (the step returns logits) or False "
            "(log-probabilities). Received: from_logits='yes'",
        ),
    ],
)
@pytest.mark.parametrize("strategy", ["greedy", "beam", "sampling"])
def test_each_mistake_is_refused_in_one_line(kwargs, message, strategy):
    kwargs = {"end_id": END, **kwargs}
    end_id = kwargs.pop("end_id")
    search = {
        "greedy": lambda: ka.greedy_search(
            log_probs_step, None, starts(), end_id, 4, **kwargs
        ),
        "beam": lambda: ka.beam_search(
            log_probs_step, None, starts(), end_id, 4, 2, **kwargs
        ),
        "sampling": lambda: ka.sampling_search(
            log_probs_step, None, starts(), end_id, 4, seed=0, **kwargs
        ),
    }[strategy]
    with pytest.raises(ValueError) as e:
        search()
    assert one_line(e) == message
