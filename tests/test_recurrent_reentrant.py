"""The attention cells keep nothing of a call on the layer, and make their
weights in `build`: one cell runs several loops at once, on every backend."""

import threading

import keras
import numpy as np
from keras import ops

from keras_attn import AttentionCellWrapper, AttentionRNN, GeneralAttention


def _np(x):
    return ops.convert_to_numpy(x)


def _luong(inner=None):
    return AttentionCellWrapper(
        inner or keras.layers.GRUCell(4),
        GeneralAttention(),
        style="luong",
        attention_units=5,
        return_alignments=True,
    )


def _arrays(rng, tv):
    x = rng.normal(size=(2, 3, 2)).astype("float32")
    return x, rng.normal(size=(2, tv, 3)).astype("float32")


def test_weights_are_complete_right_after_build():
    cell = _luong()
    cell.build([(None, 2), (None, 6, 3)])  # the step input's and the memory's
    shapes = sorted(tuple(w.shape) for w in cell.weights)
    # GRUCell(4) on [y_t; h~_{t-1}] (2 + 5), GeneralAttention's (4, 3) query
    # projection and W_c on [c_t; s_t] (3 + 4) -> 5.
    assert shapes == sorted([(7, 12), (4, 12), (2, 12), (4, 3), (7, 5)])
    assert tuple(cell.attention_kernel.shape) == (7, 5)
    states = cell.get_initial_state_with_memory(np.ones((2, 6, 3), "float32"))
    cell(np.ones((2, 2), "float32"), states)
    assert len(cell.weights) == len(shapes)


def test_a_cell_built_from_the_step_input_alone_is_built_by_the_memory():
    cell = _luong()
    cell.build((None, 2))
    states = cell.get_initial_state_with_memory(np.ones((2, 6, 3), "float32"))
    output, _ = cell(np.ones((2, 2), "float32"), states)
    assert tuple(cell.attention_kernel.shape) == (7, 5)
    assert tuple(output.shape) == (2, 5 + 6)
    assert len(cell.weights) == 5


def test_the_output_kernel_is_saved_as_the_cells_own_first_variable():
    # The layout of the files saved when W_c was a weight of the cell itself.
    cell = _luong()
    cell.build([(None, 2), (None, 6, 3)])
    store = {}
    cell.save_own_variables(store)
    assert list(store) == ["0"]
    kernel = np.arange(35, dtype="float32").reshape(7, 5)
    fresh = _luong()
    fresh.build((None, 2))  # W_c waits for the memory, or for the file
    fresh.load_own_variables({"0": kernel})
    np.testing.assert_array_equal(_np(fresh.attention_kernel), kernel)


def test_a_step_leaves_the_layer_as_it_found_it():
    seen = []

    class WatchedGRUCell(keras.layers.GRUCell):
        def call(self, *args, **kwargs):
            seen.append(dict(vars(wrapper)))
            return super().call(*args, **kwargs)

    wrapper = _luong(WatchedGRUCell(4))
    layer = AttentionRNN(wrapper)
    x, memory = _arrays(np.random.default_rng(0), 5)
    layer([x, memory])  # built, and every lazy choice made
    before = dict(vars(wrapper))
    seen.clear()
    layer([x, memory])
    assert seen
    for during in seen:
        changed = [k for k in before if during.get(k) is not before[k]]
        assert changed == [], changed


def test_two_loops_at_once_on_one_cell_give_their_own_results():
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    layer = AttentionRNN(_luong())
    inputs = [_arrays(rng, 5), _arrays(rng, 5)]
    alone = [[_np(t) for t in layer(list(pair))] for pair in inputs]
    together = [None, None]
    # Both loops are in flight at once: each waits for the other at every
    # step of its wrapped cell.
    barrier = threading.Barrier(2, timeout=60)
    inner_call = layer.cell.cell.call

    def call(*args, **kwargs):
        barrier.wait()
        return inner_call(*args, **kwargs)

    layer.cell.cell.call = call

    def run(i):
        together[i] = [_np(t) for t in layer(list(inputs[i]))]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for got, expected in zip(together, alone, strict=True):
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_output_size_comes_from_the_build_shapes_not_the_latest_memory():
    # With `return_alignments=True` the output is `[h~_t; alpha_t]`,
    # 5 + Tv wide: `output_size` knows Tv only from a static build shape.
    cell = _luong()
    cell.build([(None, 2), (None, 4, 3)])
    assert cell.output_size == 5 + 4
    states = cell.get_initial_state_with_memory(np.zeros((2, 6, 3), "float32"))
    assert cell.output_size == 5 + 4 and tuple(states[0].shape) == (2, 5 + 6)

    free = _luong()
    free.build([(None, 2), (None, None, 3)])
    free.get_initial_state_with_memory(np.zeros((2, 6, 3), "float32"))
    assert free.output_size is None

    layer = AttentionRNN(_luong())
    layer.build([(None, 3, 2), (None, 7, 3)])
    assert layer.cell.output_size == 5 + 7 and layer.cell.attention_kernel.shape == (
        3 + 4,
        5,
    )
