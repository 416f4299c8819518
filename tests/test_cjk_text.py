"""Chinese and Japanese in the graph: a character a token, and back to text."""

import pytest

pytestmark = pytest.mark.tf_only

import tensorflow as tf  # noqa: E402

from models import text  # noqa: E402
from models.text import cjk  # noqa: E402
from models.text.features import RESERVED, TextFeatures  # noqa: E402

JAPANESE = "古代戦争のリアルタイム戦略ゲームです。500 B.C. から"
CHINESE = "新华社北京电：国务院总理说“改革！”（完）"


def strings(tensor):
    return [s.decode("utf-8") for s in tensor.numpy().tolist()]


def test_surface_splits_chinese_and_japanese_into_characters():
    assert strings(text.surface([JAPANESE, CHINESE])) == [
        # Latin words and numbers among the characters stay whole; `B.C.`
        # keeps its period although `から` follows.
        "古 代 戦 争 の リ ア ル タ イ ム 戦 略 ゲ ー ム で す 。 500 B.C. か ら",
        # The sentence punctuation is a token of its own.
        "新 华 社 北 京 电 ： 国 务 院 总 理 说 `` 改 革 ！ '' （ 完 ）",
    ]
    # Halfwidth katakana and their voiced marks, the iteration mark, the
    # middle dot and fullwidth punctuation; fullwidth digits stay a number.
    assert strings(text.surface(["ﾃﾞｰﾀ・人々、２０２４年？「Ｘ」"])) == [
        "ﾃ ﾞ ｰ ﾀ ・ 人 々 、 ２０２４ 年 ？ 「 Ｘ 」"
    ]


def test_fold_masks_digits_among_characters():
    tokens = text.tokenize(["東京で2024年、NECの株価", "２０２４年"])
    assert tokens.to_list() == [
        [t.encode() for t in "東 京 で #### 年 、 nec の 株 価".split()],
        [t.encode() for t in "#### 年".split()],
    ]
    general = text.tokenize(["東京で2024年"], normalization="general")
    assert general.to_list() == [[t.encode() for t in "東 京 で 2024 年".split()]]


def test_korean_words_stay_whole():
    assert strings(text.surface(["서울 증시, 상승"])) == ["서울 증시 , 상승"]


@pytest.mark.parametrize(
    "tokens, expected",
    [
        # Characters and their punctuation written against each other,
        # numbers against characters, punctuation against anything ...
        ("東 京 株 式 が 上 昇 。", "東京株式が上昇。"),
        ("東 京 で 2024 年 、 nec の 株 価", "東京で2024年、nec の株価"),
        ("第 ２ 回 ・ #,### 円", "第２回・#,###円"),
        ("新 华 社 电 ： `` 改 革 ！ '' （ 完 ）", "新华社电：“改革！”（完）"),
        # ... while Latin words keep their spaces, among themselves and
        # beside the characters.
        ("古 代 ゲ ー ム で す 。 500 B.C. か ら", "古代ゲームです。500 B.C. から"),
        ("apple inc. が 発 表", "Apple inc. が発表"),
        ("tokyo stocks 東 京 rise", "Tokyo stocks 東京 rise"),
    ],
)
def test_detokenize_writes_characters_without_spaces(tokens, expected):
    assert strings(text.detokenize(tf.strings.split([tokens]))) == [expected]


def test_readable_headline_of_japanese():
    vocabulary = [*RESERVED, *"東京株式市場が上昇した。"]
    features = TextFeatures(vocabulary, max_source_length=24, max_target_length=10)
    documents = ["東京株式市場でNECの株価が2024年に上昇した。"]
    source = features.encode_source(tf.constant(documents))
    tokens = [["東", "京", "nec", "が", "####", "年", "上", "昇", "。"]]
    # Source words as the source writes them (`NEC`, `2024`), no spaces
    # between the characters.
    assert strings(features.readable(tf.constant(tokens), source)) == [
        "東京 NEC が2024年上昇。"
    ]


def test_vocabulary_of_japanese_counts_characters():
    texts = ["東京株式市場が上昇", "東京株式が下落"]
    tokens = text.tokenize(texts)
    vocabulary = text.build_vocabulary(tokens, min_count=2)
    assert vocabulary == [*RESERVED, "が", "京", "式", "東", "株"]


def test_lead_counts_characters_as_words():
    assert cjk.lead("Tokyo 東京株式市場", 3) == "Tokyo 東京"
    assert cjk.lead("  a  b ", 5) == "a b"
    assert cjk.lead("東京", 0) == ""
    with pytest.raises(ValueError, match="n_words=-1"):
        cjk.lead("東京", -1)
