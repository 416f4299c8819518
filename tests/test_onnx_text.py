"""The text steps of an ONNX export's client (`serving.onnx_text`), from the
regexes the export writes (`models.export.text_contract`), against the
SavedModel's own (`models.text`), with no model."""

import pytest

pytestmark = pytest.mark.tf_only

import re  # noqa: E402

import numpy as np  # noqa: E402

TEXTS = [
    "Japan's NEC Corp. said on Wednesday it would cut 2,500 jobs.",
    "Café naïve résumé «quoted» — dash – en dash",
    "東京で2024年に「データ」を。B.C.から",
    "emoji 😀 and 🚀🚀 rockets",
    "“Typographic” quotes ‘here’ and it’s the drivers’ union",
    "UNK words and <unk> and unk",
    "second-quarter profit and #st-qtr",
    "İstanbul ΟΔΟΣ 12,500 3:30 U.S. co. Calif.",
    "(brackets) [more] {curly} & amp / slash $4.3 can't won't cannot",
    "soft\u00adhyphen zero\u200bwidth non\u00a0breaking\ttab\nline",
    "dots... and … ellipsis -- dashes ?! 12% no. 5 mass. at end Mass.",
    "Ünïcödé ÉCOLE straße ǅ ŉ",
    "",
]


def test_a_class_becomes_its_ranges_inside_a_class_or_alone():
    from models.export.text_contract import python_pattern

    digits = python_pattern(r"\p{Nd}")
    assert digits.startswith(r"[\u0030-\u0039\u0660-\u0669")
    assert python_pattern(r"[#\p{Nd}]") == "[#" + digits[1:]
    # Escapes and a class's literal `]` are kept as they are.
    assert python_pattern(r"\\p[]\p{Nd}]") == r"\\p[]" + digits[1:]
    assert python_pattern(r"a\.b") == r"a\.b"
    assert re.fullmatch(digits, "\u0663", re.ASCII)  # ARABIC-INDIC DIGIT THREE
    assert not re.fullmatch(digits, "x", re.ASCII)


@pytest.fixture(scope="module")
def steps():
    """`(TextSteps, TextFeatures)` over a small vocabulary."""
    from models.export.onnx_model import contract
    from models.settings.search import SearchOptions
    from models.text import RESERVED
    from models.text.features import TextFeatures
    from serving.onnx_text import TextSteps

    vocabulary = [*RESERVED, "japan", "'s", "nec", "corp.", ".", "said", "#,###"]
    features = TextFeatures(vocabulary, max_source_length=12, max_target_length=6)
    return TextSteps(contract(features, SearchOptions()), vocabulary), features


@pytest.mark.slow
def test_the_surface_words_are_the_graph_s(steps):
    from models import text

    ours, _ = steps
    expected = text.surface_words(TEXTS).to_list()
    assert [ours.surface_words(t) for t in TEXTS] == [
        [w.decode() for w in row] for row in expected
    ]
    assert ours.surface_words(TEXTS[0])[-3:] == ["2,500", "jobs", "."]


@pytest.mark.slow
def test_the_source_ids_are_the_graph_s(steps):
    ours, features = steps
    ids, lengths, sources = ours.encode(TEXTS)
    expected = features.encode_source(TEXTS)
    np.testing.assert_array_equal(ids, expected["ext_ids"].numpy()[:, : ids.shape[1]])
    np.testing.assert_array_equal(lengths, (expected["ids"].numpy() > 0).sum(1))
    # Japan 's NEC Corp. said ... 2,500: in the vocabulary but `on` (the
    # first unknown, at 5), then a repeat (`it`, `would`: new positions).
    assert ids[0, :6].tolist() == [4, 5, 6, 7, 9, 11 + 5]


@pytest.mark.slow
def test_detokenizing_is_the_graph_s(steps):
    from models import text

    ours, _ = steps
    rows = [ours.surface_words(t) for t in TEXTS]
    rows += [["'s", ",", "nec", "calif.", "."], ["-lrb-", "#st-qtr", "-rrb-"]]
    width = max(len(r) for r in rows)
    padded = [r + [""] * (width - len(r)) for r in rows]
    expected = [h.decode() for h in text.detokenize(padded).numpy().tolist()]
    assert [ours.detokenize(r) for r in rows] == expected
    assert ours.detokenize(["japan", "'s", "nec", "-lrb-", "#", "%", "-rrb-"]) == (
        "Japan's nec (#%)"
    )
