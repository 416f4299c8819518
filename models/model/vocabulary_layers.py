"""The summarizer's two ends of the vocabulary, as the decoder takes them:
the target embedding (copied words read as `<unk>`, word and unit dropout)
and the output layer (dropout, then a `Dense(V)` or a projection onto the
tied embedding).

Both hold layers the summarizer owns (and saves under its own names); they
add no weights.
"""

import keras
from keras import ops

from models.text.ids import UNK_ID


class TargetEmbedding(keras.layers.Layer):
    """Target ids `(batch, ...)` to their embedding rows, dropped out in
    training.

    Args:
        embedding: The summarizer's `Embedding`, shared with the encoder.
        word_dropout: A `Dropout` drawing one value per word.
        dropout: A `Dropout` on the units.
    """

    def __init__(self, embedding, word_dropout, dropout, **kwargs):
        super().__init__(**kwargs)
        self.embedding = embedding
        self.word_dropout = word_dropout
        self.dropout = dropout

    def call(self, ids, training=None):
        # Copied words (extended ids) enter the decoder as <unk>.
        ids = ops.cast(ids, "int32")
        ids = ops.where(ids >= self.embedding.input_dim, UNK_ID, ids)
        # A plain lookup: the decoder needs no padding mask (the loss masks).
        embedded = ops.take(self.embedding.embeddings, ids, axis=0)
        embedded = self.word_dropout(embedded, training=training)
        return self.dropout(embedded, training=training)


class VocabularyOutput(keras.layers.Layer):
    """The decoder's outputs `(..., D)` to float32 logits `(..., V)`.

    Untied, `Dense(V)`; tied to the embedding, a `Dense(embedding_dim)`
    projection, then the embedding matrix transposed. `features` stops
    before the vocabulary, where a sampled softmax takes over in training.

    Args:
        embedding: The shared `Embedding`.
        projection: `Dense(embedding_dim)` (tied) or `Dense(V)` (untied).
        dropout: A `Dropout` on the decoder's outputs.
        tied: Whether the embedding is the output layer.
    """

    def __init__(self, embedding, projection, dropout, tied, **kwargs):
        super().__init__(**kwargs)
        self.embedding = embedding
        self.projection = projection
        self.dropout = dropout
        self.tied = tied
        self.units = embedding.input_dim

    def features(self, outputs, training=None):
        """The output layer's inputs: the vocabulary's matmul operand."""
        features = self.dropout(outputs, training=training)
        if self.tied:
            features = self.projection(features)
        return features

    def rows(self):
        """The output layer as `(rows (V, D), bias (V,) or None)`."""
        if self.tied:
            return self.embedding.embeddings, None
        return ops.transpose(self.projection.kernel), self.projection.bias

    def kernel(self, shortlist=0):
        """The `(D, V)` kernel in the compute dtype, or its first
        `shortlist` columns: a search makes it once for all its steps (tied,
        the transposed embedding, read as stored by every step's matmul)."""
        if self.tied:
            kernel = ops.transpose(self.embedding.embeddings)
        else:
            kernel = self.projection.kernel
        # Under a mixed policy the variable is float32, the features not.
        kernel = ops.cast(kernel, self.compute_dtype)
        return kernel[:, :shortlist] if shortlist else kernel

    def logits(self, features, kernel=None):
        """float32 `(..., V)` logits from `features`; `kernel`: `kernel()`
        (or a shortlist's), if already made."""
        if kernel is None:
            kernel = self.kernel()
        logits = ops.matmul(features, kernel)
        if not self.tied:
            # A shortlist's kernel has the first columns only.
            logits = logits + self.projection.bias[: kernel.shape[-1]]
        return ops.cast(logits, "float32")

    def call(self, outputs, training=None):
        return self.logits(self.features(outputs, training=training))
