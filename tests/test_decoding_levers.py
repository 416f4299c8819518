"""The export's opt-in speed levers: a vocabulary shortlist, bfloat16, XLA.

The first two change the distribution a step decodes from, by design; what
must hold is that the whole-vocabulary shortlist is the exact search, that a
shortlist only writes its own words, and that bfloat16 stays close. XLA
computes the same model: the same headlines.
"""

import numpy as np
import pytest
import tensorflow as tf
from keras import ops
from toy_summarizer import VOCAB, tiny_batch, tiny_summarizers

from models.decoding.headline_module import HeadlineModule
from models.model.ensemble import SummarizerEnsemble
from models.model.run_folder import with_dtype_policy
from models.settings.errors import UserError
from models.settings.search import SearchOptions
from models.text import RESERVED
from models.text.features import TextFeatures

pytestmark = pytest.mark.tf_only

# Letters only: Gigaword's normalization would mask digits.
WORDS = list(RESERVED) + [
    "w" + chr(97 + i // 26) + chr(97 + i % 26) for i in range(VOCAB - len(RESERVED))
]
DOCUMENTS = tf.constant(
    [" ".join(WORDS[i] for i in (30, 5, 33, 6, 31)), "wab wbk zzz wad wae", "wau wav"]
)


def decode(model, shortlist, beam):
    options = SearchOptions(
        beam_size=3, max_length=5, min_length=2, shortlist=shortlist
    )
    out = HeadlineModule(model, TextFeatures(WORDS, 7, 5), options).search(
        DOCUMENTS, beam
    )
    return out["headline_tokens"].numpy().tolist(), out["scores"].numpy()


@pytest.mark.parametrize("members", [1, 2])
def test_a_shortlist_of_the_whole_vocabulary_is_the_exact_search(members):
    models = tiny_summarizers(members)
    model = models[0] if members == 1 else SummarizerEnsemble(models)
    for beam in (1, 3):
        exact_tokens, exact_scores = decode(model, 0, beam)
        tokens, scores = decode(model, VOCAB, beam)
        assert tokens == exact_tokens
        np.testing.assert_allclose(scores, exact_scores, atol=1e-5)


def test_a_shortlist_writes_only_frequent_words_and_the_sources():
    (model,) = tiny_summarizers(1, tie_embeddings=False, copy=False)
    k = 12
    # The words past the shortlist are the likely ones.
    model.output_projection.bias.assign(np.where(np.arange(VOCAB) >= k, 5.0, 0.0))

    def outside(tokens):
        words = set()
        for row, document in zip(tokens, DOCUMENTS.numpy(), strict=True):
            allowed = set(WORDS[:k]) | set(document.decode().split())
            words |= {t.decode() for t in row if t} - allowed
        return words

    for beam in (1, 3):
        assert outside(decode(model, 0, beam)[0]), "the exact search must need it"
        assert not outside(decode(model, k, beam)[0])


def test_bfloat16_computes_in_bfloat16_close_to_float32():
    (model,) = tiny_summarizers(1)
    fast = with_dtype_policy(model, "mixed_bfloat16")
    assert fast.decoder_rnn.cell.compute_dtype == "bfloat16"
    inputs, _ = tiny_batch()
    source = (inputs["source_ids"], inputs["source_ext_ids"])
    ids = tf.constant([5, VOCAB + 2, 7])
    log_probs = []
    for m in (model, fast):
        state, memory = m.initial_decoder_state(*source)
        lp = m.step(ids, state, memory, m.output_kernel())[0]
        log_probs.append(ops.convert_to_numpy(lp))
    assert log_probs[1].dtype == np.float32
    probs = [np.exp(lp) for lp in log_probs]
    np.testing.assert_allclose(probs[1], probs[0], atol=2e-2)
    assert not np.array_equal(probs[1], probs[0])  # it did compute in bf16
    tokens, _ = decode(fast, 0, 3)
    assert all(any(t for t in row) for row in tokens)


@pytest.mark.parametrize("members, shortlist", [(1, 0), (2, 10)])
def test_a_frozen_module_saves_its_output_kernel_and_decodes_the_same(
    members, shortlist
):
    models = tiny_summarizers(members)
    model = models[0] if members == 1 else SummarizerEnsemble(models)
    options = SearchOptions(
        beam_size=3, max_length=5, min_length=2, shortlist=shortlist
    )
    live = HeadlineModule(model, TextFeatures(WORDS, 7, 5), options)
    frozen = HeadlineModule(model, TextFeatures(WORDS, 7, 5), options, frozen=True)
    # One `(D, V)` variable a member, the embedding transposed (tied).
    columns = shortlist or VOCAB
    kernels = [v for v in frozen.variables if tuple(v.shape) == (8, columns)]
    assert len(kernels) == members
    for kernel, member in zip(kernels, models, strict=True):
        expected = ops.transpose(member.embedding.embeddings)[:, :columns]
        np.testing.assert_array_equal(kernel.numpy(), expected)
    for beam in (1, 3):
        got, expected = frozen.search(DOCUMENTS, beam), live.search(DOCUMENTS, beam)
        for key in ("headlines", "headline_tokens"):
            assert got[key].numpy().tolist() == expected[key].numpy().tolist()
        np.testing.assert_array_equal(got["scores"], expected["scores"])
    # It decodes with the saved kernel, not the model's.
    for kernel in kernels:
        kernel.assign(tf.zeros_like(kernel))
    got, expected = frozen.search(DOCUMENTS, 1), live.search(DOCUMENTS, 1)
    assert not np.allclose(got["scores"], expected["scores"])


def test_xla_decodes_the_same_headlines_on_padded_shapes():
    (model,) = tiny_summarizers(1)

    def module(xla):
        options = SearchOptions(beam_size=3, max_length=5, min_length=2, xla=xla)
        return HeadlineModule(model, TextFeatures(WORDS, 7, 5), options)

    exact, compiled = module(False), module(True)
    for beam in (1, 3):
        # Traced for any batch and source length, as the SavedModel is.
        search = tf.function(lambda d, beam=beam: compiled.search(d, beam))
        search = search.get_concrete_function(tf.TensorSpec([None], tf.string))
        xla_calls = [
            op
            for op in search.graph.get_operations()
            if "_XlaMustCompile" in op.node_def.attr
            and op.node_def.attr["_XlaMustCompile"].b
        ]
        assert len(xla_calls) == 1, "the search must run as one XLA cluster"
        # 3 documents of 5 or fewer words: XLA sees 4 rows of 16 ids.
        got, expected = search(DOCUMENTS), exact.search(DOCUMENTS, beam)
        assert got["headline_tokens"].numpy().tolist() == (
            expected["headline_tokens"].numpy().tolist()
        )
        for key in ("scores", "attention"):
            assert got[key].shape == expected[key].shape
            np.testing.assert_allclose(got[key], expected[key], atol=1e-5)


@pytest.mark.parametrize("xla", [False, True])
def test_shards_decode_the_same_headlines_as_one_search(xla):
    (model,) = tiny_summarizers(1)

    def module(shards, xla=xla):
        options = SearchOptions(
            beam_size=3, max_length=5, min_length=2, xla=xla, shards=shards
        )
        return HeadlineModule(model, TextFeatures(WORDS, 7, 5), options)

    # The reference is one search without XLA (the XLA test shows that XLA
    # decodes the same). Under XLA each slice's shape compiles, so the
    # four-way split, whose rows divide as without XLA, is tried without it.
    # A shard passes the beam size on untouched: beam search alone.
    whole, halves = module(1, xla=False), module(2)
    quarters = [] if xla else [module(4)]
    beam = 3
    search = tf.function(lambda d: halves.search(d, beam))
    search = search.get_concrete_function(tf.TensorSpec([None], tf.string))
    if xla:
        # One XLA search per shard, and one for a batch too small to split.
        graph = search.graph.as_graph_def()
        nodes = list(graph.node)
        for function in graph.library.function:  # the branches of a cond
            nodes += function.node_def
        clusters = [n for n in nodes if n.attr["_XlaMustCompile"].b]
        assert len(clusters) == 3
    # 5 rows: 2 + 3 in halves, 1 + 1 + 1 + 2 in quarters; 1 row: whole.
    five = tf.concat([DOCUMENTS, DOCUMENTS[::-1][:2]], 0)
    for documents in (five, DOCUMENTS[:1]):
        expected = whole.search(documents, beam)
        for got in [search(documents)] + [q.search(documents, beam) for q in quarters]:
            # Each shard reads its own documents' text: the readable
            # headlines and the padded tokens are the whole batch's.
            for key in (
                "headlines",
                "normalized_headlines",
                "headline_tokens",
                "source_tokens",
            ):
                assert got[key].numpy().tolist() == (expected[key].numpy().tolist())
            for key in ("scores", "attention"):
                assert got[key].shape == expected[key].shape
                np.testing.assert_allclose(got[key], expected[key], atol=1e-5)


@pytest.mark.parametrize("shards", [1, 2])
def test_n_best_lists_each_documents_beams_best_first(shards):
    """The `n_best` signature's search: the first of each list is the beam
    search's headline and score; the lists, split in shards or not, agree."""
    (model,) = tiny_summarizers(1)

    def module(shards, n_best):
        options = SearchOptions(
            beam_size=3, max_length=5, min_length=2, shards=shards, n_best=n_best
        )
        return HeadlineModule(model, TextFeatures(WORDS, 7, 5), options)

    best = module(1, 0).search(DOCUMENTS, 3)
    lists = module(shards, 3).n_best_search(DOCUMENTS, 3)
    for key in ("headlines", "normalized_headlines", "scores"):
        assert lists[key].shape == (3, 3)
    for key in ("headlines", "normalized_headlines"):
        assert lists[key][:, 0].numpy().tolist() == best[key].numpy().tolist()
    scores = lists["scores"].numpy()
    np.testing.assert_allclose(scores[:, 0], best["scores"], atol=1e-5)
    assert np.all(np.diff(scores, axis=1) <= 1e-6), scores
    assert np.all(np.isfinite(scores))
    # Three beams, three different token sequences: a document's list holds
    # no hypothesis twice.
    tokens = lists["normalized_headlines"].numpy().tolist()
    assert all(len(set(row)) == 3 for row in tokens), tokens
    # An export asks for the signature; without `n_best` it has none.
    assert "n_best" in module(shards, 3).signatures()
    assert "n_best" not in module(shards, 0).signatures()


def test_n_best_must_fit_the_beam():
    with pytest.raises(UserError, match=r"beam_size=3.*Received: n_best=4"):
        SearchOptions(beam_size=3, n_best=4)


def test_shards_must_be_positive():
    with pytest.raises(UserError, match="Received: shards=0"):
        SearchOptions(shards=0)
