"""`models.text.features`: extended ids, `<unk>` against copyable words, and back.

A hand-made vocabulary of eight words, so every id below is written by hand:
`0 <pad>, 1 <unk>, 2 <s>, 3 </s>, 4 the, 5 said, 6 in, 7 .`; a source word
outside it gets `8 + i`, `i` the position of its first occurrence.
"""

import pytest

pytestmark = pytest.mark.tf_only

import tensorflow as tf  # noqa: E402

from models.text.features import RESERVED, TextFeatures  # noqa: E402

VOCAB = [*RESERVED, "the", "said", "in", "."]
V = len(VOCAB)


@pytest.fixture(scope="module")
def features():
    return TextFeatures(VOCAB, max_source_length=16, max_target_length=6)


def encode(features, documents, headlines=None):
    source = features.encode_source(tf.constant(documents))
    out = {k: v.numpy().tolist() for k, v in source.items()}
    if headlines is not None:
        target = features.encode_target(tf.constant(headlines), source)
        out.update({k: v.numpy().tolist() for k, v in target.items()})
    return source, out


def decode(features, ids, lengths, source):
    tokens, headlines = features.decode(
        tf.constant(ids, tf.int32), tf.constant(lengths, tf.int32), source["tokens"]
    )
    return (
        [[t.decode("utf-8") for t in row] for row in tokens.numpy()],
        [h.decode("utf-8") for h in headlines.numpy()],
    )


def test_repeated_unknown_word_has_one_id_and_is_copied_back(features):
    source, out = encode(features, ["Zorg said zorg in zorg ."], ["zorg in zorg"])
    # "zorg" first occurs at position 0: every occurrence is V + 0.
    assert out["ids"] == [[1, 5, 1, 6, 1, 7]]
    assert out["ext_ids"] == [[V, 5, V, 6, V, 7]]
    # The decoder reads <unk> for it; the target is the copy id, then </s>.
    assert out["target_in"] == [[2, 1, 6, 1]]
    assert out["target_out"] == [[V, 6, V, 3]]
    tokens, headlines = decode(features, [[V, 6, V, 3]], [3], source)
    assert tokens == [["zorg", "in", "zorg", ""]]
    assert headlines == ["zorg in zorg"]


def test_two_distinct_unknown_words_get_their_first_positions(features):
    _, out = encode(features, ["the blip said blop blip"], ["blop blip"])
    assert out["ext_ids"] == [[4, V + 1, 5, V + 3, V + 1]]
    assert out["target_out"] == [[V + 3, V + 1, 3]]


def test_gigaword_unk_is_unknown_and_never_copied(features):
    # TFDS writes rare words as `UNK`, the harvardnlp files as `<unk>`.
    source, out = encode(
        features,
        ["UNK said <unk> in unk", "the UNK ."],
        ["UNK in UNK", "unk said"],
    )
    # Normalization rewrites `UNK` as `<unk>`; a lower-case `unk` stays.
    assert out["tokens"][0] == [b"<unk>", b"said", b"<unk>", b"in", b"unk"]
    assert out["ids"][0] == [1, 5, 1, 6, 1]
    assert out["ext_ids"][0] == [1, 5, 1, 6, 1]  # not V + i: no copy id
    assert out["ext_ids"][1] == [4, 1, 7, 0, 0]
    # The headline's UNK stays <unk> although the source holds UNK too.
    assert out["target_out"] == [[1, 6, 1, 3], [1, 5, 3, 0]]
    # And id 1 decodes as the data writes it, never as a source word.
    tokens, headlines = decode(features, [[1, 6, 1], [1, 5, 3]], [3, 2], source)
    assert tokens == [["<unk>", "in", "<unk>"], ["<unk>", "said", ""]]
    assert headlines == ["<unk> in <unk>", "<unk> said"]


def test_unknown_headline_word_absent_from_the_source_is_unk(features):
    _, out = encode(features, ["zorg said"], ["blip said zorg"])
    assert out["target_in"] == [[2, 1, 5, 1]]
    assert out["target_out"] == [[1, 5, V, 3]]


def test_non_ascii_words_are_copied_byte_exact(features):
    document = "Müller said 한국어 in Straße , müller ."
    source, out = encode(features, [document], ["müller in 한국어 straße"])
    words = [t.decode("utf-8") for t in out["tokens"][0]]
    assert words == ["müller", "said", "한국어", "in", "straße", ",", "müller", "."]
    # "," is not in the vocabulary either: copyable like any word.
    assert out["ext_ids"] == [[V, 5, V + 2, 6, V + 4, V + 5, V, 7]]
    assert out["target_out"] == [[V, 6, V + 2, V + 4, 3]]
    tokens, headlines = decode(features, [[V + 4, 5, V, V + 2, 3]], [4], source)
    assert tokens == [["straße", "said", "müller", "한국어", ""]]
    assert headlines == ["straße said müller 한국어"]


def test_decode_prints_nothing_for_reserved_ids_and_past_the_end(features):
    source, _ = encode(features, ["zorg said", "the"])
    ids = [[0, 2, V, 4, 5], [4, 4, 4, 4, 4]]
    tokens, headlines = decode(features, ids, [5, 2], source)
    # <pad> and <s> print nothing; past `lengths` nothing either.
    assert tokens == [["", "", "zorg", "the", "said"], ["the", "the", "", "", ""]]
    assert headlines == ["zorg the said", "the the"]


def test_round_trip_of_a_headline_through_its_target_ids(features):
    documents = ["Zorg said Müller in UNK zorg .", "the blip ."]
    headlines = ["müller said zorg UNK", "blip blop the"]
    source, out = encode(features, documents, headlines)
    lengths = [sum(1 for i in row if i not in (0, 3)) for row in out["target_out"]]
    _, decoded = decode(features, out["target_out"], lengths, source)
    # Everything comes back but the word the source cannot give ("blop").
    assert decoded == ["müller said zorg <unk>", "blip <unk> the"]
