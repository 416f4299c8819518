"""Tests for `models.text`: in-graph normalization, tokens, vocabulary."""

import pytest

pytestmark = pytest.mark.tf_only


import tensorflow as tf  # noqa: E402

from models import text  # noqa: E402


def norm(s, **kwargs):
    return text.normalize(s, **kwargs).numpy().decode("utf-8")


@pytest.mark.parametrize(
    "raw, expected",
    [
        (
            "Japan's NEC Corp. said on Wednesday it would cut 2,500 jobs.",
            "japan 's nec corp. said on wednesday it would cut #,### jobs .",
        ),
        (
            "He said, \"I can't go.\" They won't pay $3.5 million (40%).",
            "he said , `` i ca n't go . '' they wo n't pay $ #.# million "
            "-lrb- ## % -rrb- .",
        ),
        (
            "Shares of Acme Co. rose in the U.S.",
            "shares of acme co. rose in the u.s. .",
        ),
        (
            "Gen. W. Bush Jr. met the drivers' union at 3:30 p.m. in Calif.; it ran.",
            "gen. w. bush jr. met the drivers ' union at #:## p.m. in calif. ; "
            "it ran .",
        ),
        (
            "HIV/AIDS & S&P -- 1990s ... ok!",
            "hiv\\/aids &amp; s&amp;p -- ####s ... ok !",
        ),
        ("He fell ill.", "he fell ill ."),
        ("Prices of UNK rose", "prices of <unk> rose"),
    ],
)
def test_normalize_gigaword_form(raw, expected):
    assert norm(raw) == expected


def test_normalize_is_idempotent_on_data_form():
    lines = [
        "japan 's nec corp. said on wednesday it would cut #,### jobs .",
        "the u.s. -lrb- ap -rrb- said `` no '' to #.# % , sources say ; ok ?",
        "s&amp;p ### rose in hiv\\/aids talks in calif. .",
        "<unk> workers ' union ca n't agree",
    ]
    assert [s.decode() for s in text.normalize(lines).numpy()] == lines


def test_normalize_unicode_and_control_characters():
    assert norm("ÉCOLE Ünïcode “Quoted” text—dash… ‘ok’") == (
        "école ünïcode `` quoted '' text -- dash ... 'ok '"
    )
    # Any script; Chinese and Japanese a character a token.
    assert norm("Ωμέγα ١٢٣ 東京 🙂") == "ωμέγα ### 東 京 🙂"
    assert norm("a\x00b\x07c\td\ne\u200bf\u00a0g\r\n") == "a b c d ef g"
    assert norm(b"bad \xff\xfe bytes \xc3") == "bad bytes"  # invalid UTF-8
    assert norm("") == "" and norm("   \n\t ") == ""


def test_normalize_shapes_and_graph():
    batch = tf.constant([["A, b.", ""], ["C", "D 1"]])
    out = text.normalize(batch)
    assert isinstance(out, tf.Tensor) and out.shape == (2, 2)
    assert out.numpy().tolist() == [[b"a , b .", b""], [b"c", b"d #"]]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(texts):
        return text.normalize(texts)

    out = serve(tf.constant(["It's 5."]))
    assert out.numpy().tolist() == [b"it 's # ."]
    ops = {op.type for op in serve.get_concrete_function().graph.get_operations()}
    assert not ops & {"PyFunc", "EagerPyFunc", "PyFuncStateless"}


def test_normalize_truncates_long_documents_first():
    # The work is bounded: the text is cut to `max_chars` (4096) before any
    # regex runs, so 120,000 characters give exactly what their first 4096
    # give.
    long_doc = "Word, " * 20_000
    out = text.normalize([long_doc] * 4).numpy()
    assert out[0] == text.normalize(long_doc[:4096]).numpy()
    assert out[0].decode().split()[:3] == ["word", ",", "word"]
    assert len(out[0].split()) <= 2 * 4096 // 6 + 2
    # Cut at a character boundary: 2-byte characters, odd byte budget.
    cut = norm("é" * 100_000, max_chars=7)
    assert cut == "é" * 7
    with pytest.raises(ValueError, match="max_chars"):
        text.normalize("x", max_chars=0)


def test_tokenize():
    tokens = text.tokenize(["Japan's NEC Corp. said.", "", "a b c d"], max_tokens=3)
    assert isinstance(tokens, tf.RaggedTensor)
    assert tokens.to_list() == [[b"japan", b"'s", b"nec"], [], [b"a", b"b", b"c"]]
    assert text.tokenize("x  y").numpy().tolist() == [b"x", b"y"]


def test_build_vocabulary_from_counts_and_dataset():
    counts = {"the": 5, "cat": 3, "UNK": 9, "<unk>": 4, "dog": 3, "rare": 1}
    vocab = text.build_vocabulary(counts, max_size=None, min_count=2)
    assert vocab == ["<pad>", "<unk>", "<s>", "</s>", "the", "cat", "dog"]
    assert text.build_vocabulary(counts, max_size=5, min_count=1)[4:] == ["the"]

    ds = tf.data.Dataset.from_tensor_slices(["a b UNK", "b c", "b"]).batch(2)
    vocab = text.build_vocabulary(ds.map(text.tokenize), max_size=10, min_count=1)
    assert vocab[4:] == ["b", "a", "c"]  # UNK normalized to <unk>, reserved
    with pytest.raises(ValueError, match="max_size"):
        text.build_vocabulary(counts, max_size=2)


def test_bad_limits_raise_one_line_errors():
    with pytest.raises(ValueError, match=r"Received: max_tokens=-1$"):
        text.tokenize(["a b"], max_tokens=-1)
    with pytest.raises(ValueError, match=r"Received: max_chars=0$"):
        text.normalize(["a b"], max_chars=0)
