"""Readable headlines: surface tokens, detokenization, case and digits back."""

import pytest

pytestmark = pytest.mark.tf_only

import tensorflow as tf  # noqa: E402

from models import text  # noqa: E402
from models.settings.errors import UserError  # noqa: E402
from models.settings.model import NORMALIZATION_CHOICES, SummarizerConfig  # noqa: E402
from models.text.features import RESERVED, TextFeatures  # noqa: E402

# Numbers, names, possessives, currency, percentages, quotes, brackets,
# slashes, hyphens, abbreviations, accents, other scripts, emoji.
CORPUS = [
    "Japan's NEC Corp. said on Wednesday it would cut 2,500 jobs in its chip division.",
    'Apple Inc. said first-quarter net rose 12% to $4.3 billion; "It\'s great," '
    "CEO Tim Cook said (Python 3).",
    "IPv4/IPv6 AT&T can't — won’t “Quoted” ÉCOLE Straße drivers' union ‘ok’",
    "HIV/AIDS & S&P -- 1990s ... OK! Gen. W. Bush Jr. met at 3:30 P.M. in Calif.",
    "He CANNOT go to the U.S. [sic] {x} at 10:45, he said: no. Mass. No. 1",
    "Ωμέγα ١٢٣ 東京タワー 🙂 Café naïve São Paulo — “Zürich” 4–2 win",
    "Prices of UNK rose &amp; fell &quot;fast&quot; in St. Louis on Sept. 11, 2001",
    "a\x00b ÉCOLE\u200b Ünïcode\u00a0TEXT 3,000,000 U.S.-based state-owned",
    "",
]


def strings(tensor):
    return [s.decode("utf-8") for s in tensor.numpy().tolist()]


@pytest.mark.parametrize("normalization", NORMALIZATION_CHOICES)
def test_surface_splits_where_the_normalization_splits(normalization):
    normalized = text.tokenize(CORPUS, normalization=normalization)
    surface = tf.strings.split(text.surface(CORPUS))
    assert surface.row_lengths().numpy().tolist() == (
        normalized.row_lengths().numpy().tolist()
    )
    folded = text.fold(surface.flat_values, normalization)
    assert strings(folded) == strings(normalized.flat_values)


def test_surface_keeps_case_and_digits():
    assert strings(text.surface(CORPUS[:3])) == [
        "Japan 's NEC Corp. said on Wednesday it would cut 2,500 jobs in its "
        "chip division .",
        "Apple Inc. said first-quarter net rose 12 % to $ 4.3 billion ; `` It 's "
        "great , '' CEO Tim Cook said -lrb- Python 3 -rrb- .",
        "IPv4\\/IPv6 AT&amp;T ca n't -- wo n't `` Quoted '' ÉCOLE Straße "
        "drivers ' union 'ok '",
    ]
    assert strings(text.fold(["IPv4\\/IPv6", "2,500", "ÉCOLE"])) == [
        "ipv#\\/ipv#",
        "#,###",
        "école",
    ]
    assert strings(text.fold(["IPv4", "2,500"], "general")) == ["ipv4", "2,500"]


def test_source_features_carry_the_surface_words_of_their_tokens():
    features = TextFeatures(VOCAB, max_source_length=6, max_target_length=8)
    source = features.encode_source(tf.constant(["NEC cuts 2,500 IPv4 jobs. More", ""]))
    assert source["surface_tokens"].numpy().tolist() == [
        [b"NEC", b"cuts", b"2,500", b"IPv4", b"jobs", b"."],
        [b"", b"", b"", b"", b"", b""],
    ]
    assert source["tokens"].numpy().tolist()[0] == [
        b"nec",
        b"cuts",
        b"#,###",
        b"ipv#",
        b"jobs",
        b".",
    ]


def test_a_word_whose_rules_depend_on_case_splits_alike_in_both_forms():
    # The long s (U+017F) is `s` to a case-insensitive `[a-z]` but stays
    # itself when lowercased: tokens come from the surface words, so the two
    # forms split it alike (`ſ n't`).
    words = text.surface_words(["\u017fn't \u212a"]).to_list()[0]
    tokens = text.tokenize(["\u017fn't \u212a"]).to_list()[0]
    assert len(words) == len(tokens) == 3
    assert strings(text.fold(tf.constant(words))) == strings(tf.constant(tokens))


@pytest.mark.parametrize(
    "tokens, expected",
    [
        ("japan 's NEC to cut 2,500 jobs", "Japan's NEC to cut 2,500 jobs"),
        (
            "apple net rises 12 % to $ 4.3 billion .",
            "Apple net rises 12% to $4.3 billion.",
        ),
        ("deficit of us$ 5.2 billion , HK$ 3", "Deficit of us$5.2 billion, HK$3"),
        ("-lrb- Python 3 -rrb- IPv4\\/IPv6 AT&amp;T", "(Python 3) IPv4/IPv6 AT&T"),
        ("he said , `` no '' ; ok ? yes !", "He said, “no”; ok? yes!"),
        ("`` no '' , he said", "“No”, he said"),
        ("i ca n't , drivers ' union 'ok '", "I can't, drivers' union 'ok'"),
        ("-lsb- x -rsb- -lcb- y -rcb- at 3:30 : wait ...", "[X] {y} at 3:30: wait..."),
        ("gains -- losses", "Gains — losses"),
        # A quarter's or a half's masked ordinal: the suffix says the digit;
        # any other masked number the source did not hold keeps its `#`.
        ("apple #st-qtr net , #th-qtr #rd-qtr", "Apple 1st-qtr net, 4th-qtr 3rd-qtr"),
        ("#nd-half loss ; #st-half", "2nd-half loss; 1st-half"),
        ("loss in ##th #rd-half ##st-qtr", "Loss in ##th #rd-half ##st-qtr"),
        ("u.s. -based firm in calif. .", "U.s. -based firm in calif."),
        ("état à 東京タワー 🙂", "État à 東京タワー 🙂"),
        ("ßig", "SSig"),
        ("... 'tis", "... 'Tis"),
        # What an unknown word left out leaves behind has no word to join.
        ("'s w3 said", "W3 said"),
        ("n't , ; stop 's", "Stop's"),
        ("", ""),
    ],
)
def test_detokenize(tokens, expected):
    out = text.detokenize(tf.strings.split([tokens]))
    assert strings(out) == [expected]


def test_detokenize_skips_empty_tokens_of_a_dense_batch():
    tokens = tf.constant([["", "-lrb-", "", "a", "-rrb-"], ["x", "'s", "", "", ""]])
    assert strings(text.detokenize(tokens)) == ["(A)", "X's"]


def test_detokenize_runs_in_a_graph_without_python():
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.string)])
    def detok(tokens):
        return text.detokenize(tokens)

    assert strings(detok(tf.constant([["$", "5"]]))) == ["$5"]
    ops = {op.type for op in detok.get_concrete_function().graph.get_operations()}
    assert not ops & {"PyFunc", "EagerPyFunc", "PyFuncStateless"}


VOCAB = [*RESERVED, "nec", "to", "cut", "jobs", "#,###", "the", "'s"]


def readable(features, documents, tokens, attention=None):
    source = features.encode_source(tf.constant(documents))
    tokens = tf.constant(tokens)
    if attention is not None:
        attention = tf.constant(attention, tf.float32)
    return strings(features.readable(tokens, source, attention))


def test_readable_words_are_the_headline_word_by_word():
    features = TextFeatures(VOCAB, max_source_length=16, max_target_length=8)
    documents = ["Japan's NEC said it would cut 2,500 jobs (at Tōshiba)."]
    source = features.encode_source(tf.constant(documents))
    tokens = tf.constant([["japan", "nec", "cut", "#,###", "jobs", "<unk>", ""]])
    words = features.readable_words(tokens, source)
    assert strings(words[0]) == ["Japan", "NEC", "cut", "2,500", "jobs", "", ""]
    assert strings(text.detokenize(words)) == strings(features.readable(tokens, source))
    # A heatmap's labels for the source: its words as written.
    assert strings(text.detokenize_words(source["surface_tokens"][0]))[7:] == [
        "2,500",
        "jobs",
        "(",
        "at",
        "Tōshiba",
        ")",
        ".",
    ]


def test_readable_takes_case_and_digits_from_the_source():
    features = TextFeatures(VOCAB, max_source_length=16, max_target_length=8)
    documents = ["Japan's NEC said it would cut 2,500 jobs at Tōshiba."]
    # `japan` and `tōshiba` are copied (out of the vocabulary); `nec` and
    # `#,###` are vocabulary words the source holds; `to` is not in it.
    source = features.encode_source(tf.constant(documents))
    assert strings(source["tokens"][0])[:3] == ["japan", "'s", "nec"]
    tokens = [["japan", "'s", "nec", "to", "cut", "#,###", "jobs", "<unk>", "tōshiba"]]
    assert readable(features, documents, tokens) == [
        "Japan's NEC to cut 2,500 jobs Tōshiba"
    ]


def test_readable_prefers_the_source_position_attended_to():
    features = TextFeatures(VOCAB, max_source_length=8, max_target_length=4)
    documents = ["NEC nec Nec"]
    attention = [[[0.1, 0.2, 0.7], [0.5, 0.3, 0.2], [0.0, 0.0, 0.0]]]
    out = readable(features, documents, [["nec", "nec", "nec"]], attention)
    # Step 0 attends to `Nec`, step 1 to `NEC`, step 2 nowhere: the first.
    assert out == ["Nec NEC NEC"]


@pytest.mark.parametrize(
    "document, tokens, expected",
    [
        # The source's ordinal, hyphenated or as two words, replaces the
        # model's masked one.
        (
            "Apple said its second-quarter net income rose 12%.",
            ["apple", "#st-qtr", "net", "rises"],
            "Apple 2nd-qtr net rises",
        ),
        (
            "Sales in the First Half fell.",
            ["#nd-half", "sales", "fall"],
            "1st-half Sales fall",
        ),
        ("Its 3rd-quarter loss widened.", ["#th-qtr", "loss"], "3rd-qtr loss"),
        # Two ordinals named, none, or one a half cannot have: the model's
        # suffix says the digit.
        (
            "First-quarter profit beat second-quarter profit.",
            ["#st-qtr", "profit"],
            "1st-qtr profit",
        ),
        (
            "Apple's profit rose.",
            ["apple", "#rd-qtr", "profit"],
            "Apple 3rd-qtr profit",
        ),
        ("The fourth quarter was weak.", ["#nd-half", "weak"], "2nd-half weak"),
    ],
)
def test_readable_takes_a_quarters_ordinal_from_the_source(document, tokens, expected):
    features = TextFeatures(VOCAB, max_source_length=16, max_target_length=8)
    assert readable(features, [document], [tokens]) == [expected]


def test_readable_general_normalization_keeps_digits_in_the_vocabulary():
    vocab = [*RESERVED, "cut", "2,500", "jobs"]
    features = TextFeatures(vocab, 16, 8, normalization="general")
    source = features.encode_source(tf.constant(["NEC cut 2,500 jobs"]))
    assert source["ids"].numpy().tolist() == [[1, 4, 5, 6]]
    out = readable(features, ["NEC cut 2,500 jobs"], [["nec", "cut", "2,500"]])
    assert out == ["NEC cut 2,500"]
    with pytest.raises(UserError, match="normalization"):
        TextFeatures(vocab, 16, 8, normalization="lower")


def test_guess_normalization_and_config():
    assert text.guess_normalization(["japan 's nec cuts #,### jobs", "a UNK b"]) == (
        "gigaword"
    )
    assert text.guess_normalization(["japan 's nec", "cuts 2,500 jobs"]) == "general"
    assert text.guess_normalization(["Japan's NEC"]) == "general"
    assert SummarizerConfig.from_dict({}).normalization == "gigaword"
    with pytest.raises(UserError, match="normalization"):
        SummarizerConfig(normalization="upper")
