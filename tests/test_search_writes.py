"""The searches write each step's extras, parents and beam history by row
(`keras_attn.search.buffers`): they decode what a select over every step
(`writes_by_select`, the writes before) decodes, eagerly and compiled, on an
empty batch too; in a TensorFlow graph by `tf.TensorArray`s, and inside
`writes_by_select` by none (the toy model of tests/toy_search.py)."""

import numpy as np
import pytest
from keras import ops
from toy_search import BACKEND, END, assert_same, initial_state, make_step, make_tables

import keras_attn as ka


def _searches(starts, bigram, by_prefix):
    """Beam (with its history), greedy and sampling search, with extras, as
    one flat dict of tensors."""
    step = make_step(bigram, by_prefix)
    args = (initial_state(starts), starts, END, 6)
    beam = ka.beam_search(
        step, *args, 3, length_penalty=0.6, num_hypotheses=2, return_beam_history=True
    )
    greedy = ka.greedy_search(step, *args, no_repeat_ngram_size=2)
    sampled = ka.sampling_search(step, *args, seed=5, top_k=3)
    found = {f"beam_history_{k}": v for k, v in beam.beam_history._asdict().items()}
    for name, result in (("beam", beam), ("greedy", greedy), ("sampled", sampled)):
        for key, value in result._asdict().items():
            if key != "beam_history":
                found[f"{name}_{key}"] = value
    return found


def _by_select(starts, *tables):
    with ka.search.writes_by_select():
        return _searches(starts, *tables)


def _compiled(function):
    """`function`, traced on its first call (under the context it runs in)."""
    if BACKEND == "jax":
        import jax

        return jax.jit(function)
    if BACKEND == "tensorflow":
        import tensorflow as tf

        return tf.function(function)
    return function


BATCHES = [[0, 2, 3, 4], []]  # and an empty batch


@pytest.mark.parametrize("starts", BATCHES)
def test_writes_by_row_decode_as_writes_by_select(starts):
    tables = make_tables(seed=4)
    starts = ops.convert_to_tensor(np.array(starts, "int32"))
    by_select = _by_select(starts, *tables)
    assert tuple(by_select["beam_extras"].shape) == (2 * len(starts), 6, 4)
    if len(starts):
        # The extras hold each step's tokens and step number: not all zero.
        assert np.abs(ops.convert_to_numpy(by_select["beam_extras"])).sum() > 0
    assert_same(by_select, _searches(starts, *tables))
    assert_same(by_select, _compiled(_searches)(starts, *tables))
    assert_same(by_select, _compiled(_by_select)(starts, *tables))


@pytest.mark.tf_only
def test_a_graph_writes_tensor_arrays_unless_by_select():
    import tensorflow as tf

    spec = [
        tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([None, None, None]),
        tf.TensorSpec([None, None]),
    ]

    def graph_ops(function):
        graph = tf.function(function).get_concrete_function(*spec).graph
        graph = graph.as_graph_def()
        found = {n.op for n in graph.node}
        for f in graph.library.function:
            found |= {n.op for n in f.node_def}
        return found

    by_row, by_select = graph_ops(_searches), graph_ops(_by_select)
    assert "TensorListSetItem" in by_row
    assert not {op for op in by_select if op.startswith("TensorList")}
    # Neither holds XLA's own update, which plain graphs cannot run.
    assert "XlaDynamicUpdateSlice" not in by_row | by_select
