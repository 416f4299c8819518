"""keras_attn's searches with ended rows dropped, under `jax.jit`,
`tf.function` and XLA, through a SavedModel, and without TensorFlow: each
decodes what the eager search decodes (the toy model of tests/toy_search.py).
"""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from keras import ops
from toy_search import (
    BACKEND,
    DROP_MODES,
    END,
    V,
    assert_same,
    initial_state,
    make_step,
    make_tables,
)

import keras_attn as ka


def compiled(search, *args, **kwargs):
    """`search(*args, **kwargs)`, under `jax.jit` on JAX: one compilation of
    all the halving stages' loops, where eagerly each stage's loop compiles
    on its own."""
    if BACKEND != "jax":
        return search(*args, **kwargs)
    import jax

    return jax.jit(lambda: search(*args, **kwargs))()


def counting_step(step, seen):
    """`step` that appends the number of rows of each call to `seen`."""

    def counted(ids, state):
        seen.append(int(ops.shape(ids)[0]))
        return step(ids, state)

    return counted


@pytest.mark.parametrize(
    "options", [{}, dict(min_length=2, no_repeat_ngram_size=2, banned_ids=[3])]
)
def test_dropping_finished_rows_decodes_the_same(options):
    tables = make_tables(seed=8)
    starts = np.array([0, 2, 3, 4, 0, 2, 4, 3, 1], "int32")
    args = (initial_state(starts), starts, END, 7)
    if BACKEND == "jax":
        with pytest.raises(ValueError, match="drop_finished=True.*backend='jax'"):
            ka.greedy_search(make_step(*tables), *args, drop_finished=True, **options)
    full = ka.greedy_search(make_step(*tables), *args, **options)
    lengths = ops.convert_to_numpy(full.lengths)
    for drop in DROP_MODES[BACKEND]:
        seen = []
        step = counting_step(make_step(*tables), seen)
        dropped = compiled(ka.greedy_search, step, *args, drop_finished=drop, **options)
        assert_same(full._asdict(), dropped._asdict())
        # The rows still open before each step were computed: no more with
        # `True`, a batch of 9 halved to 4, 2, 1 (more than half open).
        open_rows = [int((lengths >= t).sum()) for t in range(len(seen))]
        assert seen[0] == len(starts) and min(seen) < len(starts)
        if BACKEND == "jax":  # JAX traces each stage's loop once
            assert sorted(set(seen)) == [1, 2, 4, 9], seen
        elif drop is True:
            assert seen == open_rows
        else:
            assert all(s in (9, 4, 2, 1) for s in seen), seen
            assert all(o <= s < 2 * o for s, o in zip(seen, open_rows, strict=True)), (
                seen,
                open_rows,
            )


def test_halving_a_batch_larger_than_its_stages_with_rows_cut_at_max_length():
    # 2 ** 6 = 64 < 70 rows: the last stage keeps 2 rows and runs to the end.
    starts = np.random.default_rng(0).integers(0, V, 70).astype("int32")
    args = (initial_state(starts), starts, END, 3)
    tables = make_tables(seed=8)
    full = ka.greedy_search(make_step(*tables), *args)
    assert (ops.convert_to_numpy(full.lengths) == 3).any(), "rows must be cut"
    for drop in DROP_MODES[BACKEND]:
        dropped = compiled(
            ka.greedy_search, make_step(*tables), *args, drop_finished=drop
        )
        assert_same(full._asdict(), dropped._asdict())


def test_drop_finished_takes_true_false_or_halves():
    with pytest.raises(ValueError, match="Received: drop_finished='half'"):
        ka.greedy_search(
            make_step(*make_tables(seed=3)),
            None,
            np.zeros(2, "int32"),
            END,
            3,
            drop_finished="half",
        )


# ------------------------------------------------------------------ compiled


def _searches(starts, bigram, by_prefix):
    step = make_step(bigram, by_prefix)
    common = dict(min_length=1, no_repeat_ngram_size=2)
    args = (initial_state(starts), starts, END, 6)
    beam = ka.beam_search(step, *args, 3, length_penalty=0.6, banned_ids=[4], **common)
    greedy = ka.greedy_search(step, *args, **common)
    sampled = ka.sampling_search(step, *args, seed=5, top_k=3, **common)
    # A signature's outputs are tensors: the fields that are None go.
    return tuple(
        {k: v for k, v in result._asdict().items() if v is not None}
        for result in (beam, greedy, sampled)
    )


@pytest.mark.jax_only
def test_jax_jit_equals_eager():
    import jax

    jitted = jax.jit(_searches)
    # One shape: each compiles the three searches anew.
    for vocab, starts in [(7, [6, 0, 3])]:
        tables = make_tables(seed=vocab, vocab=vocab)
        starts = np.array(starts, "int32")
        for e, j in zip(
            _searches(starts, *tables), jitted(starts, *tables), strict=True
        ):
            assert_same(e, j)


@pytest.mark.torch_only
# `explain` resets dynamo's caches: the weak reference of a frame compiled
# by an earlier test, collected after, then fails to find its entry (a
# KeyError inside torch, printed and ignored).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_under_torch_compile_only_the_loops_test_leaves_the_graph():
    # A graph break costs a return to Python at each call; the loop's test
    # (a tensor read as a bool) is the one the search cannot avoid.
    import torch

    # Tensors: NumPy tables would break the toy step's own graph.
    tables = [ops.convert_to_tensor(table) for table in make_tables()]
    step = make_step(*tables, extras=False)
    starts = ops.convert_to_tensor(np.array([1, 0, 3], "int32"))

    def search(starts):
        return ka.greedy_search(step, initial_state(starts), starts, END, 4).ids

    explanation = torch._dynamo.explain(search)(starts)
    places = {
        (frame.filename, frame.name)
        for reason in explanation.break_reasons
        for frame in reason.user_stack[-1:]
    }
    assert {name for _, name in places} == {"while_loop"}, places
    assert all(path.endswith("torch/core.py") for path, _ in places), places


_SIGNATURE = [(None,), (None, None, None), (None, None)]


@pytest.mark.tf_only
def test_tf_function_with_dynamic_batch_and_vocab_equals_eager():
    import tensorflow as tf

    signature = [
        tf.TensorSpec(s, d) for s, d in zip(_SIGNATURE, TF_DTYPES, strict=True)
    ]
    graph_search = tf.function(_searches, input_signature=signature)
    for vocab, starts in [(V, [0, 2, 3]), (7, [6, 0]), (6, [])]:
        tables = make_tables(seed=vocab, vocab=vocab)
        starts = tf.constant(starts, tf.int32)
        for e, g in zip(
            _searches(starts, *tables), graph_search(starts, *tables), strict=True
        ):
            assert_same(e, g)
    assert len(graph_search._list_all_concrete_functions()) == 1


TF_DTYPES = ["int32", "float32", "float32"]


@pytest.mark.tf_only
def test_dropping_finished_rows_in_a_tf_function():
    import tensorflow as tf

    def greedy(starts, bigram, by_prefix, drop):
        step = make_step(bigram, by_prefix)
        args = (initial_state(starts), starts, END, 6)
        return ka.greedy_search(step, *args, drop_finished=drop)._asdict()

    signature = [
        tf.TensorSpec(s, d) for s, d in zip(_SIGNATURE, TF_DTYPES, strict=True)
    ]
    programs = []
    for drop in (True, "halves"):
        programs.append(
            tf.function(lambda *a, d=drop: greedy(*a, d), input_signature=signature)
        )
    programs.append(tf.function(lambda *a: greedy(*a, True)))
    # Fixed shapes in each stage: XLA compiles it (once: one shape), also
    # traced for any batch, as in a SavedModel.
    xla = [
        tf.function(lambda *a: greedy(*a, "halves"), jit_compile=True, **kwargs)
        for kwargs in ({}, {"input_signature": signature})
    ]
    for vocab, starts in [(V, [0, 2, 3, 4, 1, 0, 2, 3]), (7, [6, 0]), (6, [])]:
        tables = make_tables(seed=vocab, vocab=vocab)
        starts = tf.constant(starts, tf.int32)
        expected = greedy(starts, *tables, False)
        for program in programs + (xla if vocab == V else []):
            assert_same(expected, program(starts, *tables))


@pytest.mark.tf_only
def test_saved_model_round_trip(tmp_path):
    import tensorflow as tf

    class Searcher(tf.Module):
        def __init__(self, tables):
            super().__init__()
            self.bigram = tf.Variable(tables[0])
            self.by_prefix = tf.Variable(tables[1])

        @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
        def __call__(self, starts):
            beam, greedy, sampled = _searches(starts, self.bigram, self.by_prefix)
            return {
                **{f"beam_{k}": v for k, v in beam.items()},
                "greedy_ids": greedy["ids"],
                "sampled_ids": sampled["ids"],
            }

    module = Searcher(make_tables(seed=11))
    starts = tf.constant([0, 2, 3])
    expected = module(starts)
    tf.saved_model.save(module, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    assert_same(expected, loaded(starts))
    assert_same(module(tf.constant([4])), loaded(tf.constant([4])))
    # Only stock ops: nothing a serving binary would lack.
    graph = loaded.signatures["serving_default"].graph.as_graph_def()
    ops_used = {n.op for n in graph.node}
    for f in graph.library.function:
        ops_used |= {n.op for n in f.node_def}
    assert not {"PyFunc", "EagerPyFunc", "PyFuncStateless"} & ops_used


def _a_backend_without_tensorflow():
    """This run's backend unless it is TensorFlow; else an installed other one."""
    if BACKEND != "tensorflow":
        return BACKEND
    for name in ("torch", "jax"):
        if importlib.util.find_spec(name) is not None:
            return name
    pytest.skip("neither torch nor JAX is installed beside TensorFlow")


def test_import_and_search_do_not_import_tensorflow():
    code = (
        "import sys, numpy as np, keras_attn as ka\n"
        "from keras import ops\n"
        "step = lambda ids, s: (ops.log_softmax(ops.ones((ops.shape(ids)[0], 4))), s)\n"
        "r = ka.beam_search(step, None, np.zeros(2, 'int32'), 1, 3, 2)\n"
        "r = ka.sampling_search(step, None, np.zeros(2, 'int32'), 1, 3, seed=1)\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
    )
    env = dict(os.environ, KERAS_BACKEND=_a_backend_without_tensorflow())
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
