"""An attentional decoder composed once: teacher-forced logits in `fit`, and
`generate` with any search.

The decoder builds the one-token step (embed, run the attention cell,
project) and hands it to the model-free searches of `keras_attn.search`;
`generate` runs the search compiled (`keras_attn.decoding.compiled`).
"""

import inspect

import keras
from keras import ops

from keras_attn.arguments import deserialize_layer
from keras_attn.decoding.compiled import CompiledFunction
from keras_attn.recurrent.rnn import AttentionRNN
from keras_attn.recurrent.wrapper import AttentionCellWrapper
from keras_attn.search.checks import check_ids_in_vocabulary, check_stop_ids
from keras_attn.search.strategies import beam_search, greedy_search, sampling_search

STRATEGIES = {"greedy": greedy_search, "beam": beam_search, "sampling": sampling_search}
# What `generate` passes to every search itself.
_GIVEN = ("step", "initial_state", "start_ids", "end_id", "max_length", "from_logits")


def search_options(strategy, options):
    """`(search, options)` for `strategy`, or a one-line ValueError.

    Args:
        strategy: `"greedy"`, `"beam"` or `"sampling"`.
        options: The keyword arguments meant for the search (`beam_size`,
            `stop_ids`, `processors`, ...).
    """
    if strategy not in STRATEGIES:
        raise ValueError(
            f"`strategy` must be one of {sorted(STRATEGIES)}. Received: "
            f"strategy={strategy!r}"
        )
    search = STRATEGIES[strategy]
    allowed = set(inspect.signature(search).parameters) - set(_GIVEN)
    for name in options:
        if name not in allowed:
            raise ValueError(
                f"`{name}` is no argument of strategy={strategy!r}, which takes "
                f"{sorted(allowed)}. Received: {name}={options[name]!r}"
            )
    options = dict(options)
    if strategy == "beam":
        options.setdefault("beam_size", 4)
    return search, options


@keras.saving.register_keras_serializable(package="keras_attn")
class AttentionDecoder(keras.layers.Layer):
    """A decoder from a target embedding, an attention cell and an output layer.

    Composed once, it gives the teacher-forced logits of a target sequence
    (its `call`, inside `fit`) and generates sequences from an encoder's
    memory (`generate`) with greedy, beam or sampling search and every
    processor, as TensorFlow Addons' `BasicDecoder` and `BeamSearchDecoder`
    took the cell and the output layer. The searches stay model-free: the
    decoder gives them its `step`.

    Args:
        embedding: A Keras layer from int ids `(batch, ...)` to vectors
            `(batch, ..., d)`: the target embedding.
        cell: An `AttentionCellWrapper` of style `"bahdanau"` or `"luong"`,
            or an `AttentionRNN` that runs one.
        output_layer: A Keras layer from the cell's outputs to the vocabulary's
            logits, `(..., V)` (a `Dense(V)`).
        **kwargs: Base `Layer` arguments.

    Call arguments:
        target_ids: int `(batch, T)`: the decoder's inputs (the targets
            shifted right, the start id first).
        memory: `(batch, Tv, memory_dim)`, the encoder's outputs.
        memory_mask: Optional bool `(batch, Tv)`, False at padding.
        initial_state: Optional initial state(s) of the wrapped cell (the
            encoder's final states).
        training: Passed to the layers.

    Returns:
        The logits `(batch, T, V)`.

    Examples:
        >>> import keras
        >>> import numpy as np
        >>> import keras_attn as ka
        >>> decoder = ka.AttentionDecoder(
        ...     keras.layers.Embedding(10, 8),
        ...     ka.AttentionCellWrapper(keras.layers.GRUCell(16),
        ...         ka.BahdanauAttention(16), style="bahdanau"),
        ...     keras.layers.Dense(10))
        >>> memory = np.random.rand(2, 5, 16).astype("float32")
        >>> h = np.zeros((2, 16), "float32")
        >>> target_in = np.array([[1, 4, 5], [1, 6, 0]], "int32")
        >>> tuple(decoder(target_in, memory, initial_state=[h]).shape)
        (2, 3, 10)
        >>> result = decoder.generate(memory, initial_state=[h], start_id=1,
        ...     end_id=2, max_length=6, strategy="beam", beam_size=3)
        >>> tuple(result.ids.shape)
        (2, 6)
    """

    def __init__(self, embedding, cell, output_layer, **kwargs):
        super().__init__(**kwargs)
        cell = deserialize_layer(cell)
        rnn = cell if isinstance(cell, AttentionRNN) else None
        if rnn is None and isinstance(cell, AttentionCellWrapper):
            rnn = AttentionRNN(cell)
        if rnn is None or rnn.cell.style == "self":
            raise ValueError(
                "`cell` must be an AttentionCellWrapper attending over a memory "
                "(style 'bahdanau' or 'luong') or an AttentionRNN of one. "
                f"Received: cell={cell!r}"
            )
        self.embedding = deserialize_layer(embedding)
        self.rnn = rnn
        self.output_layer = deserialize_layer(output_layer)
        self.seed_generator = keras.random.SeedGenerator()
        self._compiled = CompiledFunction(self, self._generate_function)

    @property
    def cell(self):
        """The `AttentionCellWrapper` that runs each step."""
        return self.rnn.cell

    def call(
        self, target_ids, memory, memory_mask=None, initial_state=None, training=None
    ):
        embedded = self.embedding(target_ids, training=training)
        hidden = self.rnn(
            [embedded, memory],
            initial_state=initial_state,
            memory_mask=memory_mask,
            training=training,
        )
        if self.cell.return_alignments:
            hidden = hidden[0]
        return self.output_layer(hidden, training=training)

    def initial_search_state(self, memory, memory_mask=None, initial_state=None):
        """The step's states before the first token: the cell's, with the
        memory projected once (`get_initial_state_with_memory`)."""
        return self.cell.get_initial_state_with_memory(
            memory, memory_mask, initial_state
        )

    def step(self, ids, states):
        """One token: `(logits, states)`, or `(logits, states, attention)`
        when the cell returns its alignments (the search's `extras`).

        Args:
            ids: int32 `(N,)`, the previous token of each row.
            states: The cell's states (`initial_search_state`'s first).
        """
        output, states = self.cell(self.embedding(ids), states)
        if not self.cell.return_alignments:
            return self.output_layer(output), states
        output, attention = self.cell.split_output(output)
        return self.output_layer(output), states, attention

    def search(
        self,
        memory,
        memory_mask=None,
        initial_state=None,
        *,
        start_id,
        end_id,
        max_length,
        strategy="greedy",
        **options,
    ):
        """`generate`'s search, uncompiled: for a caller that compiles it
        itself (a `tf.function`, an exported endpoint)."""
        search, options = search_options(strategy, options)
        if strategy == "sampling" and options.get("seed") is None:
            options["seed"] = self.seed_generator
        states = self.initial_search_state(memory, memory_mask, initial_state)
        start_ids = ops.full((ops.shape(memory)[0],), start_id, "int32")
        return search(
            self.step,
            states,
            start_ids,
            end_id,
            max_length,
            from_logits=True,
            **options,
        )

    def generate(
        self,
        memory,
        memory_mask=None,
        initial_state=None,
        *,
        start_id,
        end_id,
        max_length,
        strategy="greedy",
        compiled=True,
        **options,
    ):
        """Generates sequences from the encoder's memory.

        Args:
            memory: `(batch, Tv, memory_dim)`, the encoder's outputs.
            memory_mask: Optional bool `(batch, Tv)`, False at padding.
            initial_state: Optional initial state(s) of the wrapped cell.
            start_id: Python int, the first input token of every row.
            end_id: Python int, the end token.
            max_length: Python int >= 1, the most tokens generated.
            strategy: `"greedy"`, `"beam"` or `"sampling"`.
            compiled: Run the search compiled (default): a `tf.function` on
                TensorFlow, a `jax.jit` that takes the current weights as
                arguments on JAX, without gradients on torch; traced once
                per input signature and options. False runs it eagerly.
            **options: The strategy's arguments (`keras_attn.greedy_search`,
                `beam_search`, `sampling_search`): `stop_ids`, `min_length`,
                `banned_ids`, `no_repeat_ngram_size`, `processors`;
                `beam_size` (default 4), `length_penalty`,
                `num_hypotheses`; `temperature`, `top_k`, `top_p`, `seed`
                (default: the decoder's `SeedGenerator`).

        Returns:
            A `keras_attn.search.DecodingResult`.
        """
        self.check_options(strategy, end_id, options)
        options = dict(
            options,
            start_id=start_id,
            end_id=end_id,
            max_length=max_length,
            strategy=strategy,
        )
        self._build_for(memory, memory_mask, initial_state)
        if not compiled:
            return self.search(memory, memory_mask, initial_state, **options)
        return self._compiled(options, memory, memory_mask, initial_state)

    def check_options(self, strategy, end_id, options):
        """Refuses a mistaken `generate` argument in one line, eagerly, before
        any trace (whose errors TensorFlow rewrites): the strategy, its
        options, and the end and stop ids against a `Dense` output layer's
        vocabulary (the search checks them against any other's)."""
        search_options(strategy, options)
        stop_ids = check_stop_ids(options.get("stop_ids", ()))
        vocab = getattr(self.output_layer, "units", None)
        check_ids_in_vocabulary(end_id, stop_ids, vocab)

    def _generate_function(self, options):
        def generate(memory, memory_mask, initial_state):
            return self.search(memory, memory_mask, initial_state, **options)

        return generate

    def _build_for(self, memory, memory_mask, initial_state):
        """Builds the layers eagerly (a compiled search creates no weights)."""
        if self.built:
            return
        ids = ops.zeros((ops.shape(memory)[0], 1), "int32")
        self(ids, memory, memory_mask, initial_state)

    def get_config(self):
        config = super().get_config()
        config.update(
            embedding=keras.saving.serialize_keras_object(self.embedding),
            cell=keras.saving.serialize_keras_object(self.rnn),
            output_layer=keras.saving.serialize_keras_object(self.output_layer),
        )
        return config
