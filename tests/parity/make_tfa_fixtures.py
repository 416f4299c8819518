"""Writes the TensorFlow Addons fixtures of `tests/test_tfa_parity.py`.

Runs ONLY in a side environment with TensorFlow Addons, never in the
project's (TFA needs TensorFlow <= 2.15 and Keras 2):

    python3.11 -m venv /tmp/venv-tfa
    /tmp/venv-tfa/bin/pip install tensorflow-cpu==2.15.1 tensorflow-addons==0.23.0
    /tmp/venv-tfa/bin/python tests/parity/make_tfa_fixtures.py

Each fixture is a small `.npz` next to this file: random inputs, the weights
given to TFA, and TFA's outputs, all float32 (ids int32). The test gives the
same weights to keras_attn and compares. Seeds are fixed, so running it again
writes the same numbers.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# TFA's Python `gather_tree`: its compiled op does not load on a CPU build.
os.environ.setdefault("TF_ADDONS_PY_OPS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_addons as tfa  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, TV, MEMORY_DIM = 2, 5, 6
LENGTHS = np.array([5, 3], "int32")  # the second memory has 2 padding steps


def _normal(rng, *shape, scale=0.5):
    return (rng.normal(size=shape) * scale).astype("float32")


def _save(name, **arrays):
    path = os.path.join(HERE, f"{name}.npz")
    np.savez_compressed(path, **{k: np.asarray(v) for k, v in arrays.items()})
    print(f"{path}: {os.path.getsize(path)} bytes")


def _const(value):
    return tf.keras.initializers.Constant(value)


def _mechanism(kind, rng, memory, units, query_dim):
    """A TFA mechanism over `memory` with random, non-default weights.

    Returns:
        `(mechanism, weights)`, the weights by their TFA names.
    """
    memory_kernel = _normal(rng, MEMORY_DIM, units)
    weights = {"memory_kernel": memory_kernel}
    memory_layer = tf.keras.layers.Dense(
        units, use_bias=False, kernel_initializer=_const(memory_kernel)
    )
    if kind.startswith("bahdanau"):
        weights["query_kernel"] = _normal(rng, query_dim, units)
        weights["attention_v"] = _normal(rng, units)
        mechanism = tfa.seq2seq.BahdanauAttention(
            units,
            memory=memory,
            memory_sequence_length=LENGTHS,
            normalize=kind == "bahdanau_normalize",
            kernel_initializer=_const(weights["attention_v"]),
            query_layer=tf.keras.layers.Dense(
                units,
                use_bias=False,
                kernel_initializer=_const(weights["query_kernel"]),
            ),
            memory_layer=memory_layer,
        )
    else:
        mechanism = tfa.seq2seq.LuongAttention(
            units,
            memory=memory,
            memory_sequence_length=LENGTHS,
            scale=kind == "luong_scale",
            memory_layer=memory_layer,
        )
    # Build the query-side weights, then give the gain, bias and scale values
    # far from their initial ones, so that one ignored would show.
    mechanism(
        [tf.zeros((BATCH, query_dim)), mechanism.initial_state(BATCH, tf.float32)]
    )
    if kind == "bahdanau_normalize":
        weights["attention_g"] = np.float32(1.7)
        weights["attention_b"] = _normal(rng, units)
        mechanism.attention_g.assign(weights["attention_g"])
        mechanism.attention_b.assign(weights["attention_b"])
    if kind == "luong_scale":
        weights["attention_g"] = np.float32(0.6)
        mechanism.scale_weight.assign(weights["attention_g"])
    return mechanism, weights


def make_mechanism_fixture(kind, seed):
    rng = np.random.default_rng(seed)
    units = 4
    memory = _normal(rng, BATCH, TV, MEMORY_DIM, scale=1.0)
    query = _normal(rng, BATCH, units, scale=1.0)
    mechanism, weights = _mechanism(kind, rng, memory, units, units)
    alignments, _ = mechanism(
        [tf.constant(query), mechanism.initial_state(BATCH, tf.float32)]
    )
    # Context as TFA's AttentionWrapper computes it, over the masked values.
    context = tf.squeeze(tf.matmul(alignments[:, None], mechanism.values), 1)
    _save(
        kind,
        query=query,
        memory=memory,
        lengths=LENGTHS,
        alignments=alignments.numpy(),
        context=context.numpy(),
        **weights,
    )


def make_wrapper_fixture(name, kind, output_attention, seed, layer_size=5):
    """`AttentionWrapper(LSTMCell)` run step by step over a short sequence."""
    rng = np.random.default_rng(seed)
    units, input_dim, steps = 4, 3, 4
    memory = _normal(rng, BATCH, TV, MEMORY_DIM, scale=1.0)
    inputs = _normal(rng, BATCH, steps, input_dim, scale=1.0)
    h0, c0 = _normal(rng, BATCH, units), _normal(rng, BATCH, units)
    mechanism, weights = _mechanism(kind, rng, memory, units, units)
    attention_size = layer_size or MEMORY_DIM
    weights["lstm_kernel"] = _normal(rng, input_dim + attention_size, 4 * units)
    weights["lstm_recurrent_kernel"] = _normal(rng, units, 4 * units)
    weights["lstm_bias"] = _normal(rng, 4 * units)
    cell = tf.keras.layers.LSTMCell(
        units,
        kernel_initializer=_const(weights["lstm_kernel"]),
        recurrent_initializer=_const(weights["lstm_recurrent_kernel"]),
        bias_initializer=_const(weights["lstm_bias"]),
        unit_forget_bias=False,  # else Keras builds the bias piece by piece
    )
    wrapper = tfa.seq2seq.AttentionWrapper(
        cell,
        mechanism,
        attention_layer_size=layer_size,
        alignment_history=True,
        output_attention=output_attention,
        initial_cell_state=[tf.constant(h0), tf.constant(c0)],
    )
    warm = wrapper.get_initial_state(batch_size=BATCH, dtype=tf.float32)
    _, warm = wrapper(tf.constant(inputs[:, 0]), warm)  # builds the layer
    warm.alignment_history.mark_used()
    if layer_size:
        weights["attention_layer_kernel"] = _normal(rng, units + MEMORY_DIM, layer_size)
        wrapper._attention_layers[0].kernel.assign(weights["attention_layer_kernel"])
    # A fresh state: eager TensorArrays share their buffer with the warm-up's.
    state = wrapper.get_initial_state(batch_size=BATCH, dtype=tf.float32)
    outputs = []
    for t in range(steps):
        output, state = wrapper(tf.constant(inputs[:, t]), state)
        outputs.append(output.numpy())
    history = tf.transpose(state.alignment_history.stack(), (1, 0, 2))
    _save(
        name,
        inputs=inputs,
        memory=memory,
        lengths=LENGTHS,
        h0=h0,
        c0=c0,
        outputs=np.stack(outputs, 1),
        alignment_history=history.numpy(),
        final_h=state.cell_state[0].numpy(),
        final_c=state.cell_state[1].numpy(),
        final_attention=state.attention.numpy(),
        **weights,
    )


class _Passthrough(tf.keras.layers.AbstractRNNCell):
    """A cell whose output is its input: the step is the output layer alone."""

    def __init__(self, size, **kwargs):
        super().__init__(**kwargs)
        self.size = size

    @property
    def state_size(self):
        return 1

    @property
    def output_size(self):
        return self.size

    def call(self, inputs, states):
        return inputs, states


def make_beam_fixture(name, seed, eos_bias, beam_width=3, length_penalty=0.8):
    """`BeamSearchDecoder` over a bigram model: log P(next | last) = table.

    The embedding is the identity and the output layer's kernel is the
    table, so the logits of a beam whose last token is `w` are `table[w]`.
    `eos_bias` sets how likely the end token is.
    """
    rng = np.random.default_rng(seed)
    vocab, start, end, max_length = 7, 0, 1, 6
    start_ids = np.array([start, 4], "int32")  # a different chain per row
    logits = _normal(rng, vocab, vocab, scale=2.0)
    logits[:, end] += eos_bias
    logits[start_ids, end] -= 30.0  # no empty hypothesis
    table = tf.nn.log_softmax(logits).numpy()
    decoder = tfa.seq2seq.BeamSearchDecoder(
        _Passthrough(vocab),
        beam_width,
        output_layer=tf.keras.layers.Dense(
            vocab, use_bias=False, kernel_initializer=_const(table)
        ),
        length_penalty_weight=length_penalty,
        maximum_iterations=max_length,
    )
    outputs, state, lengths = decoder(
        tf.eye(vocab),
        start_tokens=start_ids,
        end_token=end,
        initial_state=tf.zeros((BATCH * beam_width, 1)),
    )
    _save(
        name,
        table=table,
        start_ids=start_ids,
        end_id=np.int32(end),
        beam_width=np.int32(beam_width),
        max_length=np.int32(max_length),
        length_penalty=np.float32(length_penalty),
        predicted_ids=outputs.predicted_ids.numpy(),
        step_scores=outputs.beam_search_decoder_output.scores.numpy(),
        log_probs=state.log_probs.numpy(),
        lengths=state.lengths.numpy().astype("int32"),
        finished=state.finished.numpy(),
    )


def main():
    tf.keras.utils.set_random_seed(0)
    for seed, kind in enumerate(
        ["bahdanau", "bahdanau_normalize", "luong", "luong_scale"]
    ):
        make_mechanism_fixture(kind, seed)
    make_wrapper_fixture(
        "wrapper_bahdanau_output_attention", "bahdanau_normalize", True, 10
    )
    make_wrapper_fixture("wrapper_luong_output_cell", "luong_scale", False, 11)
    make_wrapper_fixture("wrapper_luong_no_layer", "luong", True, 12, layer_size=None)
    # Every hypothesis cut at max_length.
    make_beam_fixture("beam_no_early_end", 20, eos_bias=-30.0)
    # Hypotheses end at different steps; TFA and keras_attn pick the same.
    make_beam_fixture("beam_with_end", 25, eos_bias=0.0)
    # TFA scores an ending hypothesis one token short at the step it ends
    # and drops one that keras_attn keeps (see tests/test_tfa_parity.py).
    make_beam_fixture("beam_tfa_drops_end", 30, eos_bias=0.0)


if __name__ == "__main__":
    main()
