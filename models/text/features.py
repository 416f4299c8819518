"""Word ids in the graph: raw text to model inputs, model outputs to text.

Everything here is core TensorFlow (string ops and a static hash table), so
it is exported inside the SavedModel and runs on stock TensorFlow Serving.

Ids: `0 <pad>`, `1 <unk>`, `2 <s>`, `3 </s>`, then words by frequency. With
copying, a source word outside the vocabulary gets the *extended* id
`vocab_size + i`, where `i` is the position of its first occurrence in the
source: every distinct out-of-vocabulary word of a document has its own id,
and decoding an id `>= vocab_size` means copying that source word.
"""

import tensorflow as tf

from models import text
from models.settings.model import check_normalization
from models.text.ids import (  # noqa: F401
    DATA_UNK_TOKENS,
    END_ID,
    PAD_ID,
    RESERVED,
    START_ID,
    UNK_ID,
)


class TextFeatures(tf.Module):
    """Turns documents and headlines into ids and back, in the graph.

    Args:
        vocabulary: Words, the reserved tokens first (`RESERVED`).
        max_source_length: Source tokens kept.
        max_target_length: Headline tokens kept, `</s>` included.
        normalization: The text form of the vocabulary, `"gigaword"` or
            `"general"` (`models.text.normalize`).
    """

    def __init__(
        self,
        vocabulary,
        max_source_length,
        max_target_length,
        normalization="gigaword",
    ):
        super().__init__(name="text_features")
        check_normalization(normalization)
        self.normalization = normalization
        vocabulary = list(vocabulary)
        if tuple(vocabulary[: len(RESERVED)]) != RESERVED:
            raise ValueError(
                f"`vocabulary` must start with {RESERVED}. "
                f"Received: vocabulary[:{len(RESERVED)}]={vocabulary[: len(RESERVED)]}"
            )
        self.vocab_size = len(vocabulary)
        self.max_source_length = max_source_length
        self.max_target_length = max_target_length
        extra = [w for w in DATA_UNK_TOKENS if w not in vocabulary]
        keys = vocabulary + extra
        values = list(range(len(vocabulary))) + [UNK_ID] * len(extra)
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys), tf.constant(values, tf.int32)
            ),
            default_value=UNK_ID,
        )
        self.words = tf.constant(vocabulary)
        # A lookup, one hash per token, not a broadcast string comparison
        # against every marker.
        self._unk_tokens = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(DATA_UNK_TOKENS), tf.ones([len(DATA_UNK_TOKENS)], tf.int32)
            ),
            default_value=0,
        )

    def _lookup(self, tokens):
        return self.table.lookup(tokens)

    def _is_data_unk(self, tokens):
        return self._unk_tokens.lookup(tokens) > 0

    def encode_source(self, documents):
        """Raw documents `[batch]` to source features.

        Returns:
            dict of `tokens` (tf.string `[batch, S]`, "" padded), `ids` and
            `ext_ids` (int32 `[batch, S]`, 0 padded), and `surface_tokens`
            (tf.string `[batch, S]`: the words as the documents write them,
            `text.surface_words`, which fold to `tokens`).
        """
        words = text.surface_words(documents, self.max_source_length)
        words = words.to_tensor(default_value="")
        # At least one (padding) column, so that a batch of empty documents
        # still has a memory to attend over (fully masked: a zero context).
        missing = tf.maximum(0, 1 - tf.shape(words)[1])
        words = tf.pad(words, [[0, 0], [0, missing]], constant_values="")
        tokens = text.fold(words, self.normalization)
        ids = self._lookup(tokens)
        ids = tf.where(tf.equal(tokens, ""), PAD_ID, ids)
        copyable = tf.logical_and(
            tf.equal(ids, UNK_ID), tf.logical_not(self._is_data_unk(tokens))
        )
        ext_ids = tf.where(copyable, self.vocab_size + _first_positions(tokens), ids)
        return {
            "tokens": tokens,
            "surface_tokens": words,
            "ids": ids,
            "ext_ids": ext_ids,
        }

    def encode_target(self, summaries, source):
        """Headlines `[batch]` to decoder inputs and targets.

        Args:
            summaries: tf.string `[batch]`.
            source: The output of `encode_source` for the same batch.

        Returns:
            dict of `target_in` (`<s>` then in-vocabulary ids) and
            `target_out` (extended ids then `</s>`), int32 `[batch, T]`.
        """
        tokens = text.tokenize(summaries, normalization=self.normalization)
        tokens = tokens[:, : self.max_target_length - 1]
        tokens = tokens.to_tensor(default_value="")
        ids = tf.where(tf.equal(tokens, ""), PAD_ID, self._lookup(tokens))
        # An unknown headline word that the source holds is copied from it.
        src_copyable = source["ext_ids"] >= self.vocab_size
        match = tf.logical_and(
            tf.equal(tf.expand_dims(tokens, 2), tf.expand_dims(source["tokens"], 1)),
            tf.expand_dims(src_copyable, 1),
        )
        position = tf.argmax(tf.cast(match, tf.int32), axis=2, output_type=tf.int32)
        copied = tf.gather(source["ext_ids"], position, batch_dims=1)
        copy = tf.logical_and(tf.equal(ids, UNK_ID), tf.reduce_any(match, axis=2))
        ext_ids = tf.where(copy, copied, ids)

        batch = tf.shape(ids)[0]
        lengths = tf.reduce_sum(tf.cast(ids != PAD_ID, tf.int32), axis=1)
        start = tf.fill([batch, 1], START_ID)
        target_in = tf.concat([start, ids], axis=1)
        padded = tf.concat([ext_ids, tf.zeros([batch, 1], tf.int32)], axis=1)
        end_here = tf.equal(
            tf.range(tf.shape(padded)[1])[tf.newaxis], lengths[:, tf.newaxis]
        )
        target_out = tf.where(end_here, END_ID, padded)
        return {"target_in": target_in, "target_out": target_out}

    def decode(self, ids, lengths, source_tokens):
        """Extended ids `[batch, T]` to tokens and headline strings.

        Args:
            ids: int32 `[batch, T]`.
            lengths: int32 `[batch]`: tokens before `</s>`.
            source_tokens: tf.string `[batch, S]`, for copied words.

        Returns:
            `(tokens, headlines)`: tf.string `[batch, T]` ("" past the end)
            and tf.string `[batch]`.
        """
        in_vocab = ids < self.vocab_size
        vocab_words = tf.gather(self.words, tf.where(in_vocab, ids, 0))
        source_len = tf.shape(source_tokens)[1]
        position = tf.clip_by_value(ids - self.vocab_size, 0, source_len - 1)
        copied = tf.gather(source_tokens, position, batch_dims=1)
        tokens = tf.where(in_vocab, vocab_words, copied)
        # Reserved ids print nothing, but for <unk> when the search allows it.
        printable = (ids >= len(RESERVED)) | tf.equal(ids, UNK_ID)
        valid = tf.logical_and(tf.sequence_mask(lengths, tf.shape(ids)[1]), printable)
        tokens = tf.where(valid, tokens, "")
        headlines = tf.strings.reduce_join(tf.where(valid, tokens + " ", ""), axis=1)
        return tokens, tf.strings.strip(headlines)

    def readable(self, tokens, source, attention=None):
        """Headline tokens to the text a person would write, `[batch]`.

        `text.detokenize` of `readable_words`.
        """
        return text.detokenize(self.readable_words(tokens, source, attention))

    def readable_words(self, tokens, source, attention=None):
        """Headline tokens to the words the readable headline writes.

        A headline word that the source holds is written as the source
        writes it (`NEC`, `2,500` for `#,###`), from the matching position
        that the step's `attention` weighs most (the first without it); the
        unknown-word token is dropped (written "").

        Args:
            tokens: tf.string `[batch, T]` from `decode`.
            source: `encode_source`'s output for the documents.
            attention: float32 `[batch, T, S]`, optional.

        Returns:
            tf.string `[batch, T]`, PTB-tokenized ("" past the end).
        """
        # The words compared as 64-bit fingerprints, one hash per word rather
        # than a `[batch, T, S]` string comparison; two of a batch's words
        # collide with odds ~1e-15.
        same = tf.equal(
            tf.expand_dims(_fingerprints(tokens), 2),
            tf.expand_dims(_fingerprints(source["tokens"]), 1),
        )
        match = tf.logical_and(same, tf.expand_dims(tf.not_equal(tokens, ""), 2))
        if attention is None:
            attention = tf.zeros(tf.shape(match), tf.float32)
        weight = tf.where(match, tf.cast(attention, tf.float32), -1.0)
        position = tf.argmax(weight, axis=2, output_type=tf.int32)
        words = tf.where(
            tf.reduce_any(match, axis=2),
            tf.gather(source["surface_tokens"], position, batch_dims=1),
            tokens,
        )
        words = tf.where(self._is_data_unk(words), "", words)
        return _source_ordinals(words, source["surface_tokens"])


def _fingerprints(tokens):
    return tf.strings.to_hash_bucket_fast(tokens, 2**63 - 1)


# Gigaword masks the ordinal of a quarter or a half (`#st-qtr`), and a model
# may write one that the source names otherwise (`second-quarter`): where
# the source names one such ordinal, it replaces the model's. (Else
# `text.detokenize` reads the digit off the model's suffix.)
PERIODS = "quarter|qtr|half"


def _source_ordinal(surface_tokens):
    """`[batch]`: the one quarter or half ordinal (`2nd`) each source names,
    hyphenated (`second-quarter`) or not (`second quarter`), else ""."""
    words = tf.strings.lower(surface_tokens)
    following = tf.concat([words[:, 1:], tf.fill([tf.shape(words)[0], 1], "")], 1)
    period_follows = tf.strings.regex_full_match(following, PERIODS)
    named = tf.stack(
        [
            tf.reduce_any(
                tf.strings.regex_full_match(words, f"({spelled})-({PERIODS})")
                | (tf.strings.regex_full_match(words, spelled) & period_follows),
                axis=1,
            )
            for _, spelled, _ in text.PERIOD_ORDINALS
        ],
        axis=1,
    )
    count = tf.reduce_sum(tf.cast(named, tf.int32), axis=1)
    ordinal = tf.gather(
        tf.constant([digits for digits, _, _ in text.PERIOD_ORDINALS]),
        tf.argmax(tf.cast(named, tf.int32), axis=1, output_type=tf.int32),
    )
    return tf.where(count == 1, ordinal, "")


def _source_ordinals(words, surface_tokens):
    """`words` `[batch, T]` with each masked quarter or half ordinal
    (`#st-qtr`) given its source's ordinal, where the source names one that
    the period can have."""
    ordinal = _source_ordinal(surface_tokens)[:, None]
    period = tf.strings.regex_replace(words, "^#(st|nd|rd|th)-", "")
    for digits, _, periods in text.PERIOD_ORDINALS:
        takes = tf.logical_and(
            tf.equal(ordinal, digits),
            tf.strings.regex_full_match(words, f"#(st|nd|rd|th)-({periods})"),
        )
        words = tf.where(takes, digits + "-" + period, words)
    return words


def _first_positions(tokens):
    """int32 `[batch, S]`: where each token first occurs in its row.

    Equal tokens get equal extended ids. One hashing pass (`tf.unique` over
    row-keyed tokens; a row's number never holds the separator), not a
    `[batch, S, S]` string comparison.
    """
    shape = tf.shape(tokens)
    rows = tf.strings.as_string(tf.range(shape[0]))[:, None]
    keyed = tf.strings.join([tf.broadcast_to(rows, shape), tokens], separator="\x00")
    _, group = tf.unique(tf.reshape(keyed, [-1]), out_idx=tf.int32)
    positions = tf.reshape(tf.broadcast_to(tf.range(shape[1]), shape), [-1])
    first = tf.math.unsorted_segment_min(positions, group, tf.size(group))
    return tf.reshape(tf.gather(first, group), shape)
