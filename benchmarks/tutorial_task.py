"""PyTorch's seq2seq tutorial task and its model in keras-attn, torch-free.

The task (`reversal_pairs`): every pair of the same length (no padding,
which the tutorial does not mask), a source of `MAX_LENGTH - 1` random
tokens and its end token, the target the source reversed, then the end
token. The model (`keras_attn_model`): the tutorial's (GRUs of `HIDDEN`,
Bahdanau attention, dropout 0.1 on the embeddings), as
`AttentionRNN(AttentionCellWrapper(GRUCell, BahdanauAttention))`.
`greedy_decoder` decodes with it. Nothing here imports torch, so that
keras-attn runs it on TensorFlow and JAX too.
"""

import keras
from keras import ops

import keras_attn as ka

SOS, EOS = 0, 1
MAX_LENGTH = 10
HIDDEN = 128
BATCH = 32


def reversal_pairs(count, vocab, seed=0):
    """`(source, target)` int arrays `(count, MAX_LENGTH)`: tokens and EOS,
    and the tokens reversed and EOS."""
    import numpy as np

    rng = np.random.default_rng(seed)
    tokens = rng.integers(2, vocab, size=(count, MAX_LENGTH - 1))
    eos = np.full((count, 1), EOS)
    source = np.concatenate([tokens, eos], 1).astype("int64")
    target = np.concatenate([tokens[:, ::-1], eos], 1).astype("int64")
    return source, target


def decoder_inputs(target):
    """Teacher forcing: SOS, then the target but its last token."""
    import numpy as np

    return np.concatenate([np.full((len(target), 1), SOS), target[:, :-1]], 1)


def keras_attn_model(vocab, hidden=HIDDEN, dropout=0.1):
    """`[source, decoder_inputs] -> logits`, the tutorial's model (whose
    log-softmax the loss takes, `from_logits=True`)."""
    source = keras.Input((MAX_LENGTH,), dtype="int32", name="source")
    decoder_inputs = keras.Input((MAX_LENGTH,), dtype="int32", name="decoder_inputs")
    embedded = keras.layers.Embedding(vocab, hidden, name="source_embedding")(source)
    embedded = keras.layers.Dropout(dropout)(embedded)
    memory, state = keras.layers.GRU(
        hidden, return_sequences=True, return_state=True, name="encoder"
    )(embedded)
    target = keras.layers.Embedding(vocab, hidden, name="target_embedding")(
        decoder_inputs
    )
    target = keras.layers.Dropout(dropout)(target)
    cell = ka.AttentionCellWrapper(
        keras.layers.GRUCell(hidden), ka.BahdanauAttention(hidden), style="bahdanau"
    )
    outputs = ka.AttentionRNN(cell, name="decoder")(
        [target, memory], initial_state=[state]
    )
    logits = keras.layers.Dense(vocab, name="output")(outputs)
    return keras.Model([source, decoder_inputs], logits)


def greedy_decoder(model, max_length=MAX_LENGTH):
    """`decode(source) -> ids (batch, max_length)`: `keras_attn_model`'s
    greedy search, the memory projected once, one cell step a token. The
    end token is banned, so that every row runs `max_length` steps, as the
    tutorial's loop does."""
    source_embedding = model.get_layer("source_embedding")
    encoder = model.get_layer("encoder")
    target_embedding = model.get_layer("target_embedding")
    cell = model.get_layer("decoder").cell
    output = model.get_layer("output")

    def step(ids, states):
        outputs, states = cell(target_embedding(ids), states)
        return ops.log_softmax(output(outputs), -1), states

    def decode(source):
        memory, state = encoder(source_embedding(source))
        states = cell.get_initial_state_with_memory(memory, initial_state=[state])
        start_ids = ops.full((ops.shape(source)[0],), SOS, dtype="int32")
        return ka.greedy_search(
            step,
            states,
            start_ids,
            EOS,
            max_length,
            processors=[ka.BannedIds([EOS])],
            check_log_probs=False,
        ).ids

    return decode
