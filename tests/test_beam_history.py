"""`beam_search(..., return_beam_history=True)`: TFA's per-step beam outputs.

A toy bigram step worked out by hand, and TensorFlow Addons' own per-step
scores and final beams (tests/parity) for a beam where no hypothesis ends.
"""

from pathlib import Path

import numpy as np
from keras import ops

import keras_attn as ka
from keras_attn.search.strategies import BeamHistory

END = 0
# P(next | previous) over {END, 1, 2, 3}; start tokens 1 and 2.
BIGRAM = np.array(
    [
        [0.25, 0.25, 0.25, 0.25],  # after END: never read (an ended beam is frozen)
        [0.1, 0.1, 0.5, 0.3],
        [0.45, 0.1, 0.1, 0.35],
        [0.2, 0.5, 0.2, 0.1],
    ]
)


def _np(x):
    return ops.convert_to_numpy(x)


def bigram_step(ids, state, bigram=BIGRAM):
    table = ops.convert_to_tensor(np.log(bigram).astype("float32"))
    return ops.take(table, ids, axis=0), state


def backtrack(history, example, beam):
    """The tokens of `beam` at the last step, through `parent_ids` (TFA's
    `gather_tree`)."""
    tokens = []
    for t in reversed(range(history.predicted_ids.shape[1])):
        tokens.append(int(history.predicted_ids[example, t, beam]))
        beam = int(history.parent_ids[example, t, beam])
    return tokens[::-1]


def test_beam_history_of_a_toy_step_worked_out_by_hand():
    result = ka.beam_search(
        bigram_step,
        None,
        np.array([1, 2], "int32"),
        END,
        3,
        2,
        num_hypotheses=2,
        return_beam_history=True,
    )
    history = BeamHistory(*(_np(x) for x in result.beam_history))
    assert [x.dtype for x in history] == ["int32", "int32", "float32"]
    # Example 0, from 1: step 0 keeps 2 (.5) and 3 (.3). Step 1: 2 -> END
    # (.5 * .45 = .225) and 2 -> 3 (.175) beat 3 -> 1 (.15): both extend beam
    # 0. Step 2: the ended beam stays (.225), beam 1 adds 3 -> 1 (.0875).
    # Example 1, from 2: END (.45) and 3 (.35); then the ended beam (.45) and
    # 3 -> 1 (.175); then it (.45) and 1 -> 2 (.0875).
    np.testing.assert_array_equal(
        history.predicted_ids,
        [[[2, 3], [0, 3], [0, 1]], [[0, 3], [0, 1], [0, 2]]],
    )
    np.testing.assert_array_equal(
        history.parent_ids,
        [[[0, 0], [0, 0], [0, 1]], [[0, 0], [0, 1], [0, 1]]],
    )
    np.testing.assert_allclose(
        np.exp(history.scores),
        [
            [[0.5, 0.3], [0.225, 0.175], [0.225, 0.0875]],
            [[0.45, 0.35], [0.45, 0.175], [0.45, 0.0875]],
        ],
        rtol=1e-5,
    )
    # Backtracking gives the returned hypotheses, best first, end padded.
    ids = _np(result.ids).reshape(2, 2, 3)
    for example in range(2):
        for beam in range(2):
            assert backtrack(history, example, beam) == list(ids[example, beam])
    np.testing.assert_array_equal(ids[:, 0], [[2, 0, 0], [0, 0, 0]])


def test_steps_after_the_search_stopped():
    # From 1: 2 (.5) and 3 (.3), which both end next (.45 and .24); every
    # hypothesis has ended after step 1, and steps 2 to 4 were not run.
    ending = np.array(BIGRAM)
    ending[2:] = [[0.9, 0.05, 0.03, 0.02], [0.8, 0.1, 0.05, 0.05]]
    result = ka.beam_search(
        lambda ids, state: bigram_step(ids, state, ending),
        None,
        np.array([1], "int32"),
        END,
        5,
        2,
        return_beam_history=True,
    )
    history = BeamHistory(*(_np(x) for x in result.beam_history))
    assert history.predicted_ids.shape == (1, 5, 2)
    np.testing.assert_array_equal(history.predicted_ids[0, :2], [[2, 3], [END, END]])
    np.testing.assert_array_equal(history.parent_ids[0, :2], [[0, 0], [0, 1]])
    final = np.log([0.45, 0.24])
    np.testing.assert_allclose(history.scores[0, 1], final, rtol=1e-5)
    np.testing.assert_array_equal(history.predicted_ids[0, 2:], END)
    np.testing.assert_array_equal(history.parent_ids[0, 2:], [[0, 1]] * 3)
    np.testing.assert_allclose(history.scores[0, 2:], [final] * 3, rtol=1e-5)
    assert backtrack(history, 0, 1) == [3, END, END, END, END]


def test_no_history_unless_asked():
    result = ka.beam_search(bigram_step, None, np.array([1], "int32"), END, 3, 2)
    assert result.beam_history is None
    assert result._fields[-1] == "beam_history"


def test_beam_history_matches_tfas_beam_search_decoder_output():
    f = np.load(Path(__file__).parent / "parity" / "beam_no_early_end.npz")
    table = ops.convert_to_tensor(f["table"])
    result = ka.beam_search(
        lambda ids, state: (ops.take(table, ids, axis=0), state),
        None,
        f["start_ids"],
        end_id=int(f["end_id"]),
        max_length=int(f["max_length"]),
        beam_size=int(f["beam_width"]),
        length_penalty=float(f["length_penalty"]),
        return_beam_history=True,
    )
    history = BeamHistory(*(_np(x) for x in result.beam_history))
    np.testing.assert_allclose(history.scores, f["step_scores"], atol=1e-5)
    # TFA's `predicted_ids` are its beams after `gather_tree`.
    tfa = f["predicted_ids"]
    for example in range(tfa.shape[0]):
        for beam in range(tfa.shape[2]):
            assert backtrack(history, example, beam) == list(tfa[example, :, beam])
