"""The searches on torch and JAX: no gradients on torch, `jax.jit` on JAX.

On torch the step below, which has trainable weights, returns outputs that
require gradients; inside `greedy_search`, `beam_search` and
`sampling_search` (which run under `torch.no_grad()`) nothing does, and the
results carry none. On JAX, the search page's `jax.jit` of a function that
closes over the step, `max_length` and `beam_size` static, gives the eager
search's results.
"""

import inspect

import keras
import numpy as np
import pytest
from keras import ops

import keras_attn as ka

START, END, VOCAB = 1, 2, 7


def attending_step():
    """A step over a memory, with trainable weights in its score and
    output layers, returning the attention as its extras."""
    rng = np.random.default_rng(0)
    memory = rng.normal(size=(2, 5, 4)).astype("float32")
    attention = ka.BahdanauAttention(4)
    attention.build([(None, 4), (None, None, 4)])
    embedding = keras.layers.Embedding(VOCAB, 4)
    output = keras.layers.Dense(VOCAB)

    def step(ids, state):
        context, weights = attention.step(embedding(ids), state)
        return ops.log_softmax(output(context), -1), state, weights

    return step, attention.prepare_memory(memory)


@pytest.mark.torch_only
def test_the_step_alone_records_gradients():
    step, memory = attending_step()
    log_probs, _, weights = step(ops.convert_to_tensor([START, START]), memory)
    assert log_probs.requires_grad and weights.requires_grad


@pytest.mark.torch_only
@pytest.mark.parametrize(
    "search, kwargs",
    [
        (ka.greedy_search, {}),
        (ka.beam_search, {"beam_size": 3}),
        (ka.sampling_search, {"seed": 0}),
    ],
    ids=["greedy", "beam", "sampling"],
)
def test_a_search_records_no_gradients(search, kwargs):
    import torch

    step, memory = attending_step()  # beam_search tiles the state itself
    result = search(step, memory, [START, START], END, 6, **kwargs)
    tensors = {
        "log_probs": result.log_probs,
        "scores": result.scores,
        "extras": result.extras,
    }
    assert {name: t.requires_grad for name, t in tensors.items()} == dict.fromkeys(
        tensors, False
    )
    assert tuple(result.extras.shape) == (2, 6, 5)
    # The grad mode is the caller's again after the search.
    assert torch.is_grad_enabled()


def test_the_searches_keep_their_signatures():
    parameters = inspect.signature(ka.beam_search).parameters
    assert list(parameters)[:6] == [
        "step",
        "initial_state",
        "start_ids",
        "end_id",
        "max_length",
        "beam_size",
    ]


@pytest.mark.jax_only
def test_jax_jit_of_a_search_closing_over_its_step_equals_eager():
    import jax

    step, memory = attending_step()
    start_ids = ops.convert_to_tensor([START, START], dtype="int32")

    def decode(state, start_ids, max_length, beam_size):
        return ka.beam_search(step, state, start_ids, END, max_length, beam_size)

    decode_jit = jax.jit(decode, static_argnames=("max_length", "beam_size"))
    eager = decode(memory, start_ids, 6, 3)
    for _ in range(2):  # the first call compiles, the second reuses it
        jitted = decode_jit(memory, start_ids, max_length=6, beam_size=3)
        np.testing.assert_array_equal(np.asarray(jitted.ids), np.asarray(eager.ids))
        np.testing.assert_allclose(
            np.asarray(jitted.scores), np.asarray(eager.scores), rtol=1e-5
        )
    assert decode_jit._cache_size() == 1
