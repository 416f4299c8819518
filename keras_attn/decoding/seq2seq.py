"""An encoder-decoder `keras.Model` with `generate(source)`, as keras-hub's
`Seq2SeqLM`."""

import keras
from keras import ops

from keras_attn.arguments import deserialize_layer
from keras_attn.decoding.compiled import CompiledFunction
from keras_attn.decoding.decoder import AttentionDecoder


@keras.saving.register_keras_serializable(package="keras_attn")
class Seq2SeqModel(keras.Model):
    """An encoder and an `AttentionDecoder`: trained with `fit`, decoded with
    `generate(source)`.

    Args:
        encoder: A Keras layer (or model) from source ids `(batch, S)` to the
            memory `(batch, S, memory_dim)`, or to a list `[memory, *states]`
            whose states start the decoder's cell (a recurrent encoder's
            `return_state=True`).
        decoder: An `AttentionDecoder`.
        start_id: Python int, the decoder's first input token.
        end_id: Python int, the end token.
        pad_id: Python int, the source's padding id: the memory's mask is
            `source != pad_id`.
        **kwargs: Base `keras.Model` arguments.

    Call arguments:
        inputs: `[source_ids, target_in]`: int `(batch, S)` and `(batch, T)`,
            the targets shifted right (the start id first).
        training: Passed to the layers.

    Returns:
        The teacher-forced logits `(batch, T, V)`; with a copying decoder,
        the probabilities over the extended vocabulary `(batch, T, V +
        num_oov)`: the sources are then in the extended vocabulary (the
        encoder reads ids `>= V` as the decoder's `unk_id`), and
        `generate` returns extended ids.

    Examples:
        >>> import keras
        >>> import numpy as np
        >>> import keras_attn as ka
        >>> decoder = ka.AttentionDecoder(
        ...     keras.layers.Embedding(10, 8),
        ...     ka.AttentionCellWrapper(keras.layers.GRUCell(16),
        ...         ka.BahdanauAttention(16), style="bahdanau"),
        ...     keras.layers.Dense(10))
        >>> encoder = keras.Sequential([keras.layers.Embedding(10, 8),
        ...     keras.layers.GRU(16, return_sequences=True)])
        >>> model = ka.Seq2SeqModel(encoder, decoder, start_id=1, end_id=2)
        >>> source = np.array([[3, 4, 5], [6, 7, 0]], "int32")
        >>> tuple(model([source, source]).shape)
        (2, 3, 10)
        >>> tuple(model.generate(source, max_length=5).ids.shape)
        (2, 5)
    """

    def __init__(self, encoder, decoder, start_id, end_id, pad_id=0, **kwargs):
        super().__init__(**kwargs)
        decoder = deserialize_layer(decoder)
        if not isinstance(decoder, AttentionDecoder):
            raise ValueError(
                f"`decoder` must be an AttentionDecoder. Received: decoder={decoder!r}"
            )
        self.encoder = deserialize_layer(encoder)
        self.decoder = decoder
        self.start_id = start_id
        self.end_id = end_id
        self.pad_id = pad_id
        self._compiled = CompiledFunction(self, self.generate_function)

    def encode(self, source_ids, training=None):
        """`(memory, memory_mask, states)` of `source_ids` (`states`: None
        when the encoder returns the memory alone)."""
        if self.decoder.copy is not None:
            # The source in the extended vocabulary: the encoder reads a
            # word out of the vocabulary as the decoder's `unk_id`.
            source_ids = self.decoder.in_vocabulary(source_ids)
        encoded = self.encoder(source_ids, training=training)
        states = None
        if isinstance(encoded, (list, tuple)):
            encoded, *states = encoded
        return encoded, ops.not_equal(source_ids, self.pad_id), states

    def call(self, inputs, training=None):
        source_ids, target_in = inputs
        memory, mask, states = self.encode(source_ids, training=training)
        return self.decoder(
            target_in,
            memory,
            mask,
            states,
            training=training,
            source_ids=self.copied_ids(source_ids),
        )

    def copied_ids(self, source_ids):
        """The source's extended ids the decoder copies from, or None
        without copy."""
        if self.decoder.copy is None:
            return None
        return ops.cast(source_ids, "int32")

    def generate(self, source_ids, *, max_length=None, strategy="greedy", **options):
        """Encodes `source_ids` and generates their targets, compiled.

        Args:
            source_ids: int `(batch, S)`.
            max_length: Python int, the most tokens generated; default
                twice the source's length plus 2.
            strategy: `"greedy"`, `"beam"` or `"sampling"`.
            **options: As `AttentionDecoder.generate`'s (`compiled`,
                `beam_size`, `stop_ids`, ...); `start_id` and `end_id`
                default to the model's.

        Returns:
            A `keras_attn.search.DecodingResult`.
        """
        source_ids = ops.convert_to_tensor(source_ids, "int32")
        if max_length is None:
            max_length = 2 * int(source_ids.shape[1]) + 2
        compiled = options.pop("compiled", True)
        ids = ("start_id", "end_id")
        self.decoder.check_options(
            strategy,
            options.get("end_id", self.end_id),
            {k: v for k, v in options.items() if k not in ids},
        )
        options = dict(options, max_length=max_length, strategy=strategy)
        if not self.built:
            self([source_ids, source_ids[:, :1]])
        if not compiled:
            return self.generate_function(options)(source_ids)
        return self._compiled(options, source_ids)

    def generate_function(self, options):
        """`fn(source_ids) -> DecodingResult`, uncompiled, for `options`
        (`generate`'s keyword arguments): what an exported endpoint wraps."""
        options = dict(options)
        options.setdefault("start_id", self.start_id)
        options.setdefault("end_id", self.end_id)
        options.setdefault("max_length", 32)

        def generate(source_ids):
            memory, mask, states = self.encode(source_ids)
            return self.decoder.search(
                memory, mask, states, source_ids=self.copied_ids(source_ids), **options
            )

        return generate

    def get_config(self):
        config = super().get_config()
        config.update(
            encoder=keras.saving.serialize_keras_object(self.encoder),
            decoder=keras.saving.serialize_keras_object(self.decoder),
            start_id=self.start_id,
            end_id=self.end_id,
            pad_id=self.pad_id,
        )
        return config
