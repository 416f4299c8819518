"""The exported graph: text to headlines, greedy or beam, with its signatures.

`HeadlineModule` is what `export` saves and what validation and tuning
decode with: text features, encoder, the search (greedy or beam) over the
decoder's one-token step, and the readable output.

Signatures (all take `documents`, tf.string `[batch]`):

* `serving_default`: beam search; `headlines` tf.string `[batch]` (readable
  text: the source's casing and numbers, punctuation joined),
  `normalized_headlines` tf.string `[batch]` (the model's tokens in the
  data's normalized form, which ROUGE scores against the references),
  `scores` float32 `[batch]` (length-normalised log-probability; greedy
  search's includes `greedy_end_penalty`, once, at the end token).
* `greedy`: the same outputs, greedy search (its end token penalised by
  the options' `greedy_end_penalty`).
* `attention`: beam search, plus `source_tokens` `[batch, S]` and
  `headline_tokens` `[batch, T]` (normalized tokens, "" padded),
  `source_words` and `headline_words` (the same positions as the reader
  sees them: the document's words as written, the readable headline's
  words; a heatmap's labels) and `attention` float32 `[batch, T, S]`.
* `length_control`: beam search with the length settings as inputs, the
  `attention` signature's outputs. Besides `documents`: `min_length` int32
  scalar (tokens before the end; clipped to `[0, max_length]`),
  `max_length` int32 scalar (most tokens; clipped to `[1, the export's
  max_length]`), `length_penalty` float32 scalar (GNMT's alpha). With the
  values of `search_options.json` it gives `serving_default`'s headlines.
* `n_best` (only in an export with `n_best` > 0 in its options): beam
  search without XLA; `headlines`, `normalized_headlines` and `scores`,
  each `[batch, n_best]`, each document's best beams, best first.
"""

import tensorflow as tf

from models import text
from models.decoding.id_search import decode_ids
from models.decoding.saved_model_client import headlines_in_batches
from models.decoding.shards import concat_padded, in_shards
from models.decoding.xla import padded_for_xla
from models.text.features import PAD_ID, UNK_ID

_DOCUMENTS = tf.TensorSpec([None], tf.string, name="documents")
# Signatures cannot have defaults: `search_options.json`, beside the
# SavedModel, holds the values the other signatures use.
_LENGTH_CONTROL = [
    _DOCUMENTS,
    tf.TensorSpec([], tf.int32, name="min_length"),
    tf.TensorSpec([], tf.int32, name="max_length"),
    tf.TensorSpec([], tf.float32, name="length_penalty"),
]


class HeadlineModule(tf.Module):
    """The exported graph: text features, encoder, decoder and search."""

    def __init__(self, model, features, options, frozen=False):
        super().__init__(name="headline_summarizer")
        self.model = model
        self.features = features
        self.options = options
        # `frozen`: the model's weights will not change (an export), so the
        # output layer's `(D, V)` kernel, the embedding transposed when tied,
        # is made once and saved beside them; else each call transposes it,
        # under XLA a `(V, D)` copy in every shard's computation.
        self._output_kernel = None
        if frozen:
            self._output_kernel = tf.nest.map_structure(
                lambda kernel: tf.Variable(kernel, trainable=False),
                model.output_kernel(options.shortlist),
            )
        # Under XLA, one compiled function for all calls: XLA caches its
        # compilations there, one per padded shape.
        self._decode_ids = padded_for_xla(self._decode) if options.xla else self._decode

    def search(
        self,
        documents,
        beam_size,
        length_penalty=None,
        min_length=None,
        max_length=None,
        end_penalty=None,
    ):
        """Headlines for `documents` (eager or in a `tf.function`).

        `length_penalty`, `min_length`, `max_length` and greedy search's
        `end_penalty` (Python numbers or scalar tensors) override the
        options' ones: one traced graph then serves every value. The
        search's buffers stay `options.max_length` steps long, so a given
        `max_length` is clipped to `[1, options.max_length]` and applied by
        forcing the end token (`keras_attn.MaxLength`); `min_length` is
        clipped to `[0, max_length]`.
        """
        options = self.options
        if length_penalty is None:
            length_penalty = options.length_penalty
        if max_length is not None:
            max_length = tf.clip_by_value(max_length, 1, options.max_length)
        if min_length is None:
            min_length = options.min_length
        else:
            limit = options.max_length if max_length is None else max_length
            min_length = tf.clip_by_value(min_length, 0, limit)
        settings = (beam_size, length_penalty, min_length, max_length, end_penalty)

        def search_slices(slices):
            sources = [self.features.encode_source(d) for d in slices]
            # Every slice's text is read before any search starts, so that
            # no search waits for text ops the executor could have queued
            # behind the other slice's search.
            with tf.control_dependencies([s["ext_ids"] for s in sources]):
                results = [
                    self._decode_ids(
                        tf.identity(s["ids"]), tf.identity(s["ext_ids"]), *settings
                    )
                    for s in sources
                ]
            outputs = [
                self._outputs(source, result)
                for source, result in zip(sources, results, strict=True)
            ]
            return {
                key: concat_padded([output[key] for output in outputs])
                for key in outputs[0]
            }

        return in_shards(search_slices, options.shards)(documents)

    def _outputs(self, source, result):
        """`search`'s outputs from one slice's source features and search."""
        # The search returns `max_length` steps; keep those any row used.
        steps = tf.clip_by_value(
            tf.reduce_max(result.lengths) + 1, 1, self.options.max_length
        )
        ids, attention = result.ids[:, :steps], result.extras[:, :steps]
        tokens, normalized = self.features.decode(ids, result.lengths, source["tokens"])
        words = self.features.readable_words(tokens, source, attention)
        # A heatmap's labels: the words as written, the dropped unknown-word
        # token as the model wrote it, so that every row has one.
        labels = tf.where(tf.equal(words, ""), tokens, words)
        return {
            "headlines": text.detokenize(words),
            "normalized_headlines": normalized,
            "scores": result.scores,
            "source_tokens": source["tokens"],
            "headline_tokens": tokens,
            "source_words": text.detokenize_words(source["surface_tokens"]),
            "headline_words": text.detokenize_words(labels),
            "attention": attention,
        }

    def search_ids(self, source_ids, source_lengths):
        """The served beam search from source ids, no text (eager or in a
        `tf.function`): what an ids-level export (ONNX) holds.

        Args:
            source_ids: int32 `[batch, S]`, the extended ids of
                `TextFeatures.encode_source` (`ext_ids`: a source word
                outside the vocabulary is `vocab_size` plus its first
                position); past `source_lengths` they are read as padding.
            source_lengths: int32 `[batch]`, tokens per source.

        Returns:
            dict of `ids` (int32 `[batch, max_length]`, extended ids, the
            end token's id from `lengths` on), `lengths` (int32 `[batch]`,
            tokens before the end token), `scores` (float32 `[batch]`) and
            `attention` (float32 `[batch, max_length, S]`, each step's
            attention over the source, the members' mean).
        """
        options = self.options
        mask = tf.sequence_mask(source_lengths, tf.shape(source_ids)[1])
        ext_ids = tf.where(mask, source_ids, PAD_ID)
        ids = tf.where(ext_ids >= self.features.vocab_size, UNK_ID, ext_ids)
        result = self._decode(
            ids,
            ext_ids,
            options.beam_size,
            options.length_penalty,
            options.min_length,
            None,
        )
        return {
            "ids": result.ids,
            "lengths": result.lengths,
            "scores": result.scores,
            "attention": result.extras,
        }

    def n_best_search(self, documents, num_hypotheses):
        """The `num_hypotheses` best beams of each document (eager or in a
        `tf.function`): `headlines`, `normalized_headlines` and `scores`,
        each `[batch, num_hypotheses]`, best first.

        The search runs without XLA, whose padded batch would hide which
        rows belong to which document.
        """
        options, n = self.options, num_hypotheses

        def search_slices(slices):
            outputs = []
            for part in slices:
                source = self.features.encode_source(part)
                result = self._decode(
                    source["ids"],
                    source["ext_ids"],
                    options.beam_size,
                    options.length_penalty,
                    options.min_length,
                    None,
                    num_hypotheses=n,
                )
                # Row `b * n + i` is document b's i-th best: its source too.
                tiled = {k: tf.repeat(v, n, axis=0) for k, v in source.items()}
                out = _headline_outputs(self._outputs(tiled, result))
                outputs.append({k: tf.reshape(v, [-1, n]) for k, v in out.items()})
            return {k: tf.concat([o[k] for o in outputs], 0) for k in outputs[0]}

        return in_shards(search_slices, options.shards)(documents)

    def _decode(
        self,
        ids,
        ext_ids,
        beam_size,
        length_penalty,
        min_length,
        max_length,
        end_penalty=None,
        num_hypotheses=1,
    ):
        """Source ids to a `keras_attn.search.DecodingResult`: encoder and
        search (`id_search.decode_ids`)."""
        return decode_ids(
            self.model,
            ids,
            ext_ids,
            self.options,
            beam_size=beam_size,
            length_penalty=length_penalty,
            min_length=min_length,
            max_length=max_length,
            end_penalty=end_penalty,
            num_hypotheses=num_hypotheses,
            output_kernel=self._output_kernel,
        )

    # No AutoGraph: the search is `keras.ops` with explicit loops (it runs
    # under `jax.jit` too), so AutoGraph would only rewrite its source, work
    # that every trace of an export would pay for nothing.
    # The default signature is `attention`'s search, called rather than
    # traced a second time: one graph for the two.
    @tf.function(input_signature=[_DOCUMENTS], autograph=False)
    def beam(self, documents):
        return _headline_outputs(self.attention(documents))

    @tf.function(input_signature=[_DOCUMENTS], autograph=False)
    def greedy(self, documents):
        return _headline_outputs(self.search(documents, 1))

    @tf.function(input_signature=[_DOCUMENTS], autograph=False)
    def attention(self, documents):
        return self.search(documents, self.options.beam_size)

    @tf.function(input_signature=_LENGTH_CONTROL, autograph=False)
    def length_control(self, documents, min_length, max_length, length_penalty):
        return self.search(
            documents, self.options.beam_size, length_penalty, min_length, max_length
        )

    def signatures(self):
        """The SavedModel's signatures: name to `tf.function`.

        Functions, not concrete functions: `tf.saved_model.save` traces them
        in its own context, whose trace cache is apart from the caller's, so
        a concrete function traced here would be traced again there.
        """
        functions = {
            "serving_default": self.beam,
            "greedy": self.greedy,
            "attention": self.attention,
            "length_control": self.length_control,
        }
        if self.options.n_best:
            # Made here, not a method: the export traces every `tf.function`
            # attribute that has an input signature, and only an export
            # that asks for this one should pay for its trace.
            functions["n_best"] = tf.function(
                lambda documents: self.n_best_search(documents, self.options.n_best),
                input_signature=[_DOCUMENTS],
                autograph=False,
            )
        return functions


def headline_search(model, features, options, beam_size):
    """`model`'s search under `options`, traced once, as a function from
    documents to headlines.

    The function takes documents (str or bytes) and, as keywords, the
    levers of `HeadlineModule.search` to set (`length_penalty`,
    `end_penalty`; Python numbers, fed as scalar tensors, so that one trace
    serves every value), and gives the normalized headlines (the data's
    form, which ROUGE compares with the references) as str, decoded in
    batches (`saved_model_client.headlines_in_batches`). Validation ROUGE
    during training and tuning decode with it.

    Args:
        model: a `HeadlineSummarizer` or `SummarizerEnsemble`.
        features: its `TextFeatures`.
        options: the `SearchOptions` searched with.
        beam_size: beams (1: greedy search).

    Returns:
        `headlines(documents, **levers) -> list of str`.
    """
    module = HeadlineModule(model, features, options)
    traced = tf.function(
        lambda documents, levers: module.search(documents, beam_size, **levers)[
            "normalized_headlines"
        ],
        autograph=False,
    )

    def headlines(documents, **levers):
        tensors = {name: tf.constant(float(v)) for name, v in levers.items()}
        return headlines_in_batches(lambda batch: traced(batch, tensors), documents)

    return headlines


def _headline_outputs(out):
    return {k: out[k] for k in ("headlines", "normalized_headlines", "scores")}
