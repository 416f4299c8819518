"""The headline summarizer: a bidirectional encoder, an attentional decoder.

The decoder is keras_attn's `AttentionDecoder` over a Luong cell without
input feeding: `call` takes its teacher-forced outputs over a whole headline
(the loss may sample the output layer), `step` its one-token outputs over a
memory that `initial_decoder_state` projected once, with the output head
the searches need (a kernel made once, a shortlist).

Architecture (Luong et al. 2015, with See et al. 2017's copy and coverage):

    memory, s_0       = BiRNN(embed(source))
    s_t               = RNN(embed(y_{t-1}), s_{t-1})
    c_t, a_t          = attention(s_t, memory)          # any keras_attn score
    h~_t              = tanh(W_c [c_t; s_t])
    P_vocab           = softmax(W_o h~_t)               # tied to the embedding
    P(w)              = p_gen P_vocab(w) + (1 - p_gen) sum_{i: x_i = w} a_t,i
"""

import keras
from keras import ops

import keras_attn
from keras_attn.copy.coverage import CoverageAttention, coverage_loss
from keras_attn.copy.distributions import (
    PointerGenerator,
    mix_target_probabilities,
    pointer_generator_log_distribution,
)
from keras_attn.copy.shortlist import shortlist_log_distribution
from keras_attn.recurrent.memory_states import split_memory_states
from models.model.sampled_softmax import log_uniform_candidates, sampled_log_partition
from models.model.vocabulary_layers import TargetEmbedding, VocabularyOutput
from models.settings.model import SummarizerConfig
from models.text.ids import UNK_ID

_EPSILON = 1e-9


def make_attention(config):
    """The keras_attn layer named by `config.attention`."""
    units = config.attention_units
    if config.coverage:
        if config.attention not in ("bahdanau", "bahdanau-normalized"):
            raise ValueError(
                "`attention` must be 'bahdanau' or 'bahdanau-normalized' with "
                "coverage, which enters the additive score. "
                f"Received: attention={config.attention!r}"
            )
        return CoverageAttention(
            units, normalize=config.attention == "bahdanau-normalized", name="attention"
        )
    return {
        "bahdanau": lambda: keras_attn.BahdanauAttention(units, name="attention"),
        "bahdanau-normalized": lambda: keras_attn.BahdanauAttention(
            units, normalize=True, name="attention"
        ),
        "luong-dot": lambda: keras_attn.DotAttention(name="attention"),
        "luong-scale": lambda: keras_attn.DotAttention(
            use_scale=True, name="attention"
        ),
        "luong-general": lambda: keras_attn.GeneralAttention(name="attention"),
        "luong-concat": lambda: keras_attn.ConcatAttention(units, name="attention"),
        "scaled-dot": lambda: keras_attn.ScaledDotAttention(name="attention"),
    }[config.attention]()


def in_multi_worker_mode(strategy):
    """Whether `strategy` spans more than one worker (None: one process).

    TensorFlow has no public way to ask this: a
    `MultiWorkerMirroredStrategy` given a single-worker cluster (no
    `TF_CONFIG`) runs like a local one, so its type does not tell. Keras asks
    the same private method (`strategy.extended._in_multi_worker_mode()`, in
    `keras/src/backend/tensorflow/trainer.py`) before it reduces a step's
    logs across workers; this is the one place `models/` calls it.
    """
    return strategy is not None and strategy.extended._in_multi_worker_mode()


@keras.saving.register_keras_serializable(package="keras_attn_models")
class HeadlineSummarizer(keras.Model):
    """Encoder-decoder with attention, optional copy and coverage.

    Args:
        config: A `SummarizerConfig` or its dict.

    Call arguments:
        inputs: dict of int32 tensors: `source_ids` and `source_ext_ids`
            `(batch, S)`, `target_in` `(batch, T)`.

    Returns:
        dict of `features` `(batch, T, D)`, the output layer's inputs
        (`vocabulary_output.logits` turns them into `(batch, T, V)` logits; the
        loss may sample the vocabulary instead), `attention` float32
        `(batch, T, S)`, and with copying `p_gen` `(batch, T, 1)`; with
        coverage, `coverage_loss` `(batch, T)`.
    """

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = SummarizerConfig.from_dict(config)
        config.check_settled(("max_source_length",))  # the copy's extended ids
        self.config = config
        c = config
        rnn = keras.layers.LSTM if c.cell == "lstm" else keras.layers.GRU
        self.embedding = keras.layers.Embedding(
            c.vocab_size, c.embedding_dim, mask_zero=True, name="embedding"
        )
        self.embedding_dropout = keras.layers.Dropout(c.dropout)
        # One draw per word, shared by its embedding's units.
        self.source_word_dropout = keras.layers.Dropout(
            c.word_dropout, noise_shape=(None, None, 1)
        )
        self.target_word_dropout = keras.layers.Dropout(
            c.word_dropout, noise_shape=(None, None, 1)
        )
        # The layers below the top one (`encoder`, whose final states start
        # the decoder) return their sequences only.
        self.lower_encoders = [
            keras.layers.Bidirectional(
                rnn(c.hidden_size // 2, return_sequences=True),
                name=f"encoder_{i}",
            )
            for i in range(c.encoder_layers - 1)
        ]
        self.encoder_dropout = keras.layers.Dropout(c.dropout)
        self.encoder = keras.layers.Bidirectional(
            rnn(c.hidden_size // 2, return_sequences=True, return_state=True),
            name="encoder",
        )
        self.bridge = keras.layers.Dense(
            c.hidden_size, activation="tanh", name="bridge"
        )
        # The decoder's cell is this layer's (which keeps its weights' path);
        # the decoder runs the cell, never the layer: built here.
        self.decoder_rnn = rnn(
            c.hidden_size, return_sequences=True, return_state=True, name="decoder_rnn"
        )
        self.decoder_rnn.build((None, None, c.embedding_dim))
        self.attention = make_attention(c)
        self.attentional = keras.layers.Dense(
            c.hidden_size, activation="tanh", use_bias=False, name="attentional"
        )
        self.output_dropout = keras.layers.Dropout(c.dropout)
        if c.tie_embeddings:
            self.output_projection = keras.layers.Dense(
                c.embedding_dim, name="to_embedding"
            )
        else:
            self.output_projection = keras.layers.Dense(c.vocab_size, name="output")
            # `call` stops at the features (the loss may sample the output
            # layer): build it here so its weights exist from the first call.
            self.output_projection.build((None, c.hidden_size))
        self.pointer = PointerGenerator(name="pointer") if c.copy else None
        # Sampling as many words as the vocabulary holds (or more) only adds
        # noise: a small vocabulary trains on the full softmax.
        self.samples_output = 0 < c.sampled_softmax < c.vocab_size
        if self.samples_output:
            self.sampling_seed = keras.random.SeedGenerator(0, name="sampling_seed")
        # Its name sorts after the layers it is made of, so saved weights
        # keep their paths (Keras saves a layer under the first attribute
        # name that reaches it).
        self.target_decoder = self.compose_decoder()

    # ------------------------------------------------------------- pieces

    def compose_decoder(self):
        """keras_attn's `AttentionDecoder` of the summarizer's layers: the
        shared embedding, `decoder_rnn`'s cell under a Luong attention
        without input feeding (`attentional` its `W_c`), the (tied) output
        layer and the pointer, whose gate reads `s_t` as See et al.'s."""
        c = self.config
        return keras_attn.AttentionDecoder(
            TargetEmbedding(
                self.embedding, self.target_word_dropout, self.embedding_dropout
            ),
            keras_attn.LuongAttentionCell(
                self.decoder_rnn.cell,
                self.attention,
                input_feeding=False,
                attention_layer=self.attentional,
                return_alignments=True,
            ),
            VocabularyOutput(
                self.embedding,
                self.output_projection,
                self.output_dropout,
                tied=c.tie_embeddings,
            ),
            copy=self.pointer,
            num_oov=c.max_source_length if c.copy else None,
            unk_id=UNK_ID if c.copy else None,
            copy_gate_state="cell" if c.copy else "output",
            coverage_loss_weight=0.0,  # `compute_loss` weighs it per token
            name="target_decoder",
        )

    @property
    def _state_count(self):
        return 2 if self.config.cell == "lstm" else 1

    def encode(self, source_ids, training=None, by_length=False):
        """Encodes the source.

        `by_length`: at inference, each encoder layer runs on the rows still
        inside their length (`keras_attn.bidirectional_by_length`): the same
        outputs for less work, which pays under XLA, whose shapes are fixed.

        Returns:
            `(memory, mask, initial_state)`: `(batch, S, hidden)`,
            bool `(batch, S)`, and the decoder's initial states.
        """
        mask = ops.not_equal(source_ids, 0)
        embedded = self.source_word_dropout(
            self.embedding(source_ids), training=training
        )
        embedded = self.embedding_dropout(embedded, training=training)
        by_length = by_length and not training
        lengths = ops.sum(ops.cast(mask, "int32"), axis=-1) if by_length else None

        def run(layer, inputs):
            if by_length:  # the sources are right-padded
                return keras_attn.bidirectional_by_length(layer, inputs, lengths)
            return layer(inputs, mask=mask, training=training)

        for layer in self.lower_encoders:
            embedded = self.encoder_dropout(run(layer, embedded), training=training)
        outputs = run(self.encoder, embedded)
        memory, states = outputs[0], outputs[1:]
        n = self._state_count
        forward, backward = states[:n], states[n:]
        initial_state = [
            self.bridge(ops.concatenate([f, b], axis=-1))
            if i == 0
            else ops.concatenate([f, b], axis=-1)
            for i, (f, b) in enumerate(zip(forward, backward, strict=True))
        ]
        return memory, mask, initial_state

    @property
    def vocabulary_output(self):
        """The decoder's output layer (`VocabularyOutput`)."""
        return self.target_decoder.output_layer

    def output_kernel(self, shortlist=0):
        """The output layer's `(D, V)` kernel, made once by a search for all
        its `step`s; `shortlist`: if > 0, its first `shortlist` columns only
        (see `initial_decoder_state`)."""
        return self.vocabulary_output.kernel(shortlist)

    # ------------------------------------------------------------- forward

    def call(self, inputs, training=None):
        memory, mask, initial_state = self.encode(
            inputs["source_ids"], training=training
        )
        outputs = self.target_decoder.teacher_forced_outputs(
            inputs["target_in"], memory, mask, initial_state, training=training
        )
        weights = outputs.attention
        result = {
            "features": self.vocabulary_output.features(
                outputs.hidden, training=training
            ),
            "attention": weights,
        }
        if self.config.coverage:
            coverage = ops.cumsum(weights, axis=1) - weights
            result["coverage_loss"] = coverage_loss(weights, coverage, reduction="none")
        if self.pointer is not None:
            result["p_gen"] = outputs.copy_gate
        return result

    def target_log_probability(self, outputs, inputs, target_out, sampled=False):
        """log P(target) per token, `(batch, T)`, copy included.

        `sampled=True` estimates the vocabulary part from
        `config.sampled_softmax` sampled words (if set).
        """
        return self._target_log_probability(outputs, inputs, target_out, sampled)[0]

    def _target_log_probability(self, outputs, inputs, target_out, sampled):
        """`(log P(target), log Z)`, `(batch, T)` each; `log Z` is the
        vocabulary softmax's log partition function (estimated if sampled)."""
        vocab_size = self.config.vocab_size
        target_out = ops.cast(target_out, "int32")
        in_vocab = ops.less(target_out, vocab_size)
        # Without copying, a word out of the vocabulary is scored as <unk>.
        fallback = UNK_ID if self.pointer is None else 0
        ids = ops.where(in_vocab, target_out, fallback)
        features = outputs["features"]
        if sampled and self.samples_output:
            rows, bias = self.vocabulary_output.rows()
            sampled_ids, log_q = log_uniform_candidates(
                self.config.sampled_softmax, vocab_size, seed=self.sampling_seed
            )
            target_logits, log_z = sampled_log_partition(
                features, rows, bias, ids, sampled_ids, log_q
            )
        else:
            logits = self.vocabulary_output.logits(features)
            target_logits = ops.take_along_axis(
                logits, ops.expand_dims(ids, -1), axis=-1
            )[..., 0]
            log_z = ops.logsumexp(logits, axis=-1)
        vocab_log_prob = target_logits - log_z
        if self.pointer is None:
            return vocab_log_prob, log_z
        probability = mix_target_probabilities(
            outputs["p_gen"],
            ops.exp(vocab_log_prob) * ops.cast(in_vocab, "float32"),
            outputs["attention"],
            inputs["source_ext_ids"],
            target_out,
        )
        return ops.log(probability + _EPSILON), log_z

    def uniform_cross_entropy(self, features, log_z):
        """Cross-entropy of the vocabulary softmax against the uniform
        distribution, `(batch, T)`: label smoothing's term.

        `-mean_w log P(w) = log Z - mean_w logit(w)`; the mean logit is exact
        for the price of one `(D,)` product, the mean row of the output layer,
        so a sampled softmax's `log Z` estimate is all it needs.
        """
        rows, bias = self.vocabulary_output.rows()
        mean_row = ops.mean(ops.cast(rows, "float32"), axis=0)
        mean_logit = ops.matmul(ops.cast(features, "float32"), mean_row)
        if bias is not None:
            mean_logit = mean_logit + ops.mean(ops.cast(bias, "float32"))
        return log_z - mean_logit

    # ---------------------------------------- Keras' TF trainer, multi-worker

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Under a distribution strategy, Keras builds on a first batch that
        # it all-reduces across replicas. Under MultiWorkerMirroredStrategy
        # that fails on dict inputs (keras-team/keras#20329), and batches
        # bucketed by length differ in shape from worker to worker anyway.
        # `models.training.fit.build_model` builds the weights and the optimizer
        # first, which leaves nothing to build.
        if self.built and (self.optimizer is None or self.optimizer.built):
            return
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def train_step(self, *args, **kwargs):
        return self._per_worker_logs(super().train_step(*args, **kwargs))

    def test_step(self, *args, **kwargs):
        return self._per_worker_logs(super().test_step(*args, **kwargs))

    def _per_worker_logs(self, logs):
        # Across workers, Keras averages a step's logs with
        # `strategy.reduce("MEAN", log, axis=0)`, which fails on the scalars
        # that metrics are (tensorflow/tensorflow#72388). One entry per worker
        # on a new axis 0 makes it the mean over workers.
        strategy = getattr(self, "_distribute_strategy", None)
        if not in_multi_worker_mode(strategy):
            return logs
        return {name: ops.expand_dims(value, 0) for name, value in logs.items()}

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        target_mask = ops.cast(ops.not_equal(y, 0), "float32")
        tokens = ops.maximum(ops.sum(target_mask), 1.0)
        log_prob, log_z = self._target_log_probability(y_pred, x, y, training)
        nll = -log_prob
        if self.config.label_smoothing:
            # On the vocabulary part: the copy mixture keeps its target.
            smoothing = self.config.label_smoothing
            nll = (1 - smoothing) * nll + smoothing * self.uniform_cross_entropy(
                y_pred["features"], log_z
            )
        loss = ops.sum(nll * target_mask) / tokens
        if self.config.coverage:
            loss += (
                self.config.coverage_weight
                * ops.sum(y_pred["coverage_loss"] * target_mask)
                / tokens
            )
        return loss

    # ------------------------------------------------------------- decoding step

    def initial_decoder_state(
        self, source_ids, source_ext_ids, shortlist=0, by_length=False
    ):
        """Encodes once and returns the decoding state and the fixed memory.

        `shortlist`: if > 0, `step` scores only the `shortlist` most frequent
        words (the vocabulary is sorted by frequency) and the source's words,
        and renormalises over them (`keras_attn.shortlist_log_distribution`):
        faster, and approximate. `step` then takes `output_kernel(shortlist)`.

        Returns:
            `(state, memory)`: `state` is the decoder cell's list of states
            with the batch first (what a beam search reorders); `memory`
            holds what stays fixed per source: the cell's memory states
            (the projected keys, the values, the mask), the source's
            extended ids (and, shortlisting, the output layer's rows of the
            source's words).
        """
        values, mask, initial_state = self.encode(
            source_ids, training=False, by_length=by_length
        )
        states = self.target_decoder.cell.get_initial_state_with_memory(
            values, mask, initial_state
        )
        state, memory_states = split_memory_states(states)
        memory = {"cell": memory_states, "source_ext_ids": source_ext_ids}
        if shortlist:
            rows, bias = self.vocabulary_output.rows()
            in_vocab = ops.minimum(source_ext_ids, self.config.vocab_size - 1)
            rows = ops.cast(rows, self.compute_dtype)
            memory["source_rows"] = ops.take(rows, in_vocab, axis=0)
            if bias is not None:
                memory["source_bias"] = ops.take(bias, in_vocab, axis=0)
        return state, memory

    def step(self, ids, state, memory, output_kernel=None):
        """Decodes one token.

        Args:
            ids: int32 `(N,)`: the previous tokens (extended ids allowed).
            state: The states from `initial_decoder_state` or the previous
                step.
            memory: The fixed memory, rows aligned with `ids`.
            output_kernel: `output_kernel()`, computed once for all steps.

        Returns:
            `(log_probs, state, attention)`: float32 `(N, V)`, or
            `(N, V + S)` with copying; the new state; float32 `(N, S)`.
        """
        outputs, states = self.target_decoder.step_outputs(
            ids, [*state, *memory["cell"]]
        )
        weights, p_gen = outputs.attention, outputs.copy_gate
        features = self.vocabulary_output.features(outputs.hidden, training=False)
        # With a shortlist, `output_kernel` has its columns only.
        logits = self.vocabulary_output.logits(features, output_kernel)
        if "source_rows" in memory:
            log_probs = self._shortlist_log_probs(
                features, logits, p_gen, weights, memory
            )
        elif p_gen is None:
            log_probs = ops.log_softmax(logits, axis=-1)
        else:
            # Extended ids are vocab_size + a source position.
            log_probs = pointer_generator_log_distribution(
                p_gen,
                logits,
                weights,
                memory["source_ext_ids"],
                num_oov=self.config.max_source_length,
            )
        return log_probs, split_memory_states(states)[0], weights

    def _shortlist_log_probs(self, features, shortlist_logits, p_gen, weights, memory):
        source_logits = ops.einsum("nd,nsd->ns", features, memory["source_rows"])
        if "source_bias" in memory:
            source_logits = source_logits + memory["source_bias"]
        copy = {}
        if p_gen is not None:
            copy = dict(
                p_gen=p_gen, attention=weights, num_oov=self.config.max_source_length
            )
        return shortlist_log_distribution(
            shortlist_logits,
            source_logits,
            memory["source_ext_ids"],
            self.config.vocab_size,
            **copy,
        )

    def get_config(self):
        return {**super().get_config(), "config": self.config.to_dict()}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
