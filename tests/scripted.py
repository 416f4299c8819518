"""A headline model whose every step is set by hand: headlines known in advance.

`ScriptedModel` has the summarizer's decoding interface
(`initial_decoder_state`, `step`, `output_kernel`), so `HeadlineModule` and
`models.export.saved_model.export` take it as they take a trained model. Its step reads
the source, not its own past: at step `t` it offers the source's word `t`.

* At a source word `w`: `w` has probability `WORD_PROBS[w][0]`, the end
  token `WORD_PROBS[w][1]` (0.7 and 0.2 for any word not listed there);
  the rest is shared equally by the other ids.
* Past the source's end: the end token 0.6, the vocabulary's first word
  after the reserved ones (`FILLER` in `WORDS`) 0.3, the rest shared.

Any vocabulary works (a run's own, say): `ScriptedModel(vocabulary)`.

The attention of step `t` is all on source position `t` (the last one past
the end). So the best headline of a document of plain words is the document
itself, cut at the search's `max_length`; `expected_log_prob` gives any
headline's log-probability from the same table, without any search.
"""

import numpy as np
import tensorflow as tf

from models.settings.search import SearchOptions
from models.text import RESERVED
from models.text.features import END_ID, PAD_ID, TextFeatures

FILLER = "filler"
WORDS = list(RESERVED) + [
    FILLER,
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "maybe",
]
# (the word's probability, the end token's) at a source position.
WORD_PROBS = {"maybe": (0.5, 0.4)}
PLAIN = (0.7, 0.2)
PAST_END = {"</s>": 0.6, FILLER: 0.3}
OPTIONS = SearchOptions(
    beam_size=2, length_penalty=1.0, min_length=1, max_length=5, no_repeat_ngram_size=0
)


def features(max_source_length=8, vocabulary=WORDS, normalization="gigaword"):
    """The `TextFeatures` of `vocabulary`."""
    return TextFeatures(
        vocabulary, max_source_length, OPTIONS.max_length + 1, normalization
    )


def _probs_at(word, vocabulary=WORDS):
    """The step's probabilities over `vocabulary` at a source word.

    `word`: an id, or None past the source's end.
    """
    v = len(vocabulary)
    if word is None:
        filler = len(RESERVED)
        chosen = {filler: PAST_END[FILLER], END_ID: PAST_END["</s>"]}
    else:
        p_word, p_end = WORD_PROBS.get(vocabulary[word], PLAIN)
        chosen = {word: p_word, END_ID: p_end}
    rest = (1.0 - sum(chosen.values())) / (v - len(chosen))
    probs = np.full(v, rest)
    for i, p in chosen.items():
        probs[i] = p
    return probs


def expected_log_prob(document, headline, ended=True):
    """The log-probability of `headline` (words) for `document`, in numpy.

    Both in `WORDS`, space-separated. `ended`: the end token follows the
    headline's words (it is scored).
    """
    source = [WORDS.index(w) for w in document.split()]
    tokens = [WORDS.index(w) for w in headline.split()] + ([END_ID] if ended else [])
    total = 0.0
    for t, token in enumerate(tokens):
        total += np.log(_probs_at(source[t] if t < len(source) else None)[token])
    return total


class ScriptedModel:
    """The decoding interface of `HeadlineSummarizer`, with hand-set steps."""

    def __init__(self, vocabulary=WORDS):
        table = [_probs_at(None, vocabulary)]
        # The end token as a source word: only padding is never one.
        table += [_probs_at(i, vocabulary) for i in range(len(vocabulary))]
        # Row 0: past the source (and padding); row 1 + id: at that word.
        self._log_probs = tf.constant(np.log(np.stack(table)), tf.float32)

    def output_kernel(self, shortlist=0):
        del shortlist  # the scripted step has no output layer
        return tf.zeros([1, 1])

    def initial_decoder_state(self, ids, ext_ids, shortlist=0, by_length=False):
        del ext_ids, shortlist, by_length
        state = {"t": tf.zeros([tf.shape(ids)[0]], tf.int32)}
        return state, {"ids": ids}

    def step(self, ids, state, memory, output_kernel=None):
        del ids, output_kernel
        t, source = state["t"], memory["ids"]
        length = tf.shape(source)[1]
        position = tf.minimum(t, length - 1)
        word = tf.gather(source, position, batch_dims=1)
        word = tf.where((t < length) & (word != PAD_ID), word, -1)
        log_probs = tf.gather(self._log_probs, word + 1)
        attention = tf.one_hot(position, length, dtype=tf.float32)
        return log_probs, {"t": t + 1}, attention
