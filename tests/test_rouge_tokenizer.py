"""ROUGE's tokens: rouge-score's own on ASCII text, every script's elsewhere."""

import pytest

pytestmark = pytest.mark.tf_only

from rouge_score import rouge_scorer  # noqa: E402

from models.scoring import metrics  # noqa: E402
from models.scoring.metrics import RougeTokenizer  # noqa: E402

# Gigaword-like (prediction, reference) pairs, made up: punctuation, `#`
# digits, `'s`, `n't`, UNK and <unk>, hyphens, PTB brackets and escapes,
# short words the stemmer leaves alone, and plain digits.
ASCII_PAIRS = [
    (
        "japan 's nec corp. to cut #,### jobs",
        "nec corp. says it would cut #,### jobs in chip division",
    ),
    ("us stocks rise on jobs data", "u.s. stocks rallied as jobless claims fell"),
    ("UNK president accuses former vice president", "zambia president accuses UNK"),
    ("<unk> molding runs around the wall", "ways to install <unk> or composite <unk>"),
    (
        "eu can supply arms to iraq , ministers say",
        "eu can supply arms materials to iraq under conditions say ministers",
    ),
    ("first-quarter net profit rises ## %", "#st-qtr profits rising ##.# pct"),
    ("can't , won't and don't", "ca n't agree , wo n't go"),
    ("at&amp;t -lrb- ap -rrb- hiv\\/aids", "at&t (ap) hiv/aids talks"),
    ("`` no '' to deal ; sources say ...", "'' no deal '' , sources said !"),
    ("Apple Inc. said net rose 12% to $4.3 billion", "apple's profit jumped 12 pct"),
    ("the the the cat", "the cat sat on the mat"),
    ("running runner runs ran", "he runs and runs; running is fun"),
    ("a b c d", "a b x y"),
    ("", "empty prediction scores zero"),
    ("only punctuation scores zero", "-- ... , ; !"),
    ("state-owned u.s.-based firm", "state owned us based firms"),
    ("## killed in baghdad blast", "at least ## killed as bomb hits baghdad market"),
    ("clinton 's visit to china 's capital", "clinton visits beijing"),
    ("oil prices hit record highs", "crude oil price hits a new record high"),
    ("UNK UNK UNK", "unk unk"),
    (
        "world cup : brazil beat germany #-#",
        "brazil beats germany 2-0 in world cup final",
    ),
    ("universities' generalizations", "university generalization"),
]


def test_ascii_tokens_are_rouge_scores_own():
    default = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)._tokenizer
    ours = RougeTokenizer()
    for pair in ASCII_PAIRS:
        for text in pair:
            assert ours.tokenize(text) == default.tokenize(text), text


def test_ascii_scores_are_rouge_scores_own():
    default = rouge_scorer.RougeScorer(list(metrics.ROUGE_TYPES), use_stemmer=True)
    predictions, references = zip(*ASCII_PAIRS, strict=True)
    scores = metrics.rouge_scores(predictions, references)
    for i, (prediction, reference) in enumerate(ASCII_PAIRS):
        result = default.score(reference.strip(), prediction.strip())
        expected = [result[name].fmeasure for name in metrics.ROUGE_TYPES]
        # Identical tokens, identical arithmetic: equal to the last bit.
        assert scores[i].tolist() == expected, (prediction, reference)


def test_ascii_words_in_other_text_are_tokenized_as_alone():
    # The words of non-ASCII text that are ASCII get rouge-score's tokens
    # and stems: `companies` -> `compani`, `running` -> `run`, `its` stays.
    ours = RougeTokenizer()
    assert ours.tokenize("Running “quoted” companies' its — 東京") == [
        "run",
        "quot",
        "compani",
        "its",
        "東",
        "京",
    ]
    assert ours.tokenize("Running “quoted” companies' its — 東京")[:4] == (
        ours.tokenize('Running "quoted" companies\' its --')
    )


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("Москва выборы", ["москва", "выборы"]),
        ("Αθήνα σεισμός", ["αθήνα", "σεισμός"]),
        ("東京 株式 市場 上昇", ["東", "京", "株", "式", "市", "場", "上", "昇"]),
        ("café à Zürich", ["café", "à", "zürich"]),
        # Canonical and compatibility forms: a combining accent, fullwidth
        # digits, halfwidth katakana; punctuation of every script dropped.
        ("cafe\u0301 «Zürich»", ["café", "zürich"]),
        ("２０２４年「ﾃﾞｰﾀ」。", ["2024", "年", "デ", "ー", "タ"]),
        (
            "ゲームです。500 B.C. から",
            ["ゲ", "ー", "ム", "で", "す", "500", "b", "c"] + ["か", "ら"],
        ),
        # Korean writes spaces: its words stay whole.
        ("서울 증시, 상승", ["서울", "증시", "상승"]),
        # Combining vowel signs belong to their word.
        ("हिन्दी समाचार", ["हिन्दी", "समाचार"]),
    ],
)
def test_tokens_of_other_scripts(text, tokens):
    assert RougeTokenizer().tokenize(text) == tokens


def rouge(prediction, reference):
    (scores,) = metrics.rouge_scores([prediction], [reference])
    return dict(zip(metrics.ROUGE_TYPES, scores.tolist(), strict=True))


def test_scores_by_hand_in_other_scripts():
    # Each F1 by hand, from shared tokens: 2 x shared / (|prediction| +
    # |reference|), for unigrams (rouge1), bigrams (rouge2) and the longest
    # common subsequence (rougeL, rougeLsum on a single sentence).
    # [москва, выборы] against itself: all match.
    assert rouge("Москва выборы", "Москва выборы") == pytest.approx(
        {"rouge1": 1.0, "rouge2": 1.0, "rougeL": 1.0, "rougeLsum": 1.0}
    )
    # [αθήνα, σεισμός] vs [αθήνα, πυρκαγιά]: 1 of 2 unigrams, 2 x 1 / 4 = 1/2;
    # no bigram; LCS 1, 1/2.
    assert rouge("Αθήνα σεισμός", "Αθήνα πυρκαγιά") == pytest.approx(
        {"rouge1": 0.5, "rouge2": 0.0, "rougeL": 0.5, "rougeLsum": 0.5}
    )
    # 8 characters vs 6 (東 京 株 式 下 落), 4 shared: 2 x 4 / 14 = 4/7;
    # bigrams 7 vs 5, 3 shared (東京 京株 株式): 2 x 3 / 12 = 1/2; LCS 4: 4/7.
    assert rouge("東京 株式 市場 上昇", "東京 株式 下落") == pytest.approx(
        {"rouge1": 4 / 7, "rouge2": 0.5, "rougeL": 4 / 7, "rougeLsum": 4 / 7}
    )
    # Written without spaces, the same characters score the same.
    assert rouge("東京株式市場上昇", "東京株式下落") == rouge(
        "東京 株式 市場 上昇", "東京 株式 下落"
    )
    # [café, à, zürich] vs [café, à, genève]: 2 of 3, 2 x 2 / 6 = 2/3;
    # bigram `café à` 1 of 2, 2 x 1 / 4 = 1/2; LCS 2: 2/3.
    assert rouge("café à Zürich", "café à Genève") == pytest.approx(
        {"rouge1": 2 / 3, "rouge2": 0.5, "rougeL": 2 / 3, "rougeLsum": 2 / 3}
    )
    # Mixed: [nec, s, profit, rose, 12, in, 東, 京] (8) vs
    # [nec, profit, rise, in, tokyo, 東, 京] (7): 5 shared (nec profit in 東 京),
    # 2 x 5 / 15 = 2/3; bigrams 7 vs 6, 1 shared (東京): 2 x 1 / 13 = 2/13;
    # LCS nec profit in 東 京, 5: 2/3.
    assert rouge(
        "NEC's profits rose 12% in 東京", "NEC profit rises in Tokyo 東京"
    ) == (
        pytest.approx(
            {"rouge1": 2 / 3, "rouge2": 2 / 13, "rougeL": 2 / 3, "rougeLsum": 2 / 3}
        )
    )


def test_rouge_scores_are_not_zero_where_rouge_score_reads_nothing():
    # rouge-score's default tokens are `[a-z0-9]` runs: no token at all here.
    default = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    assert default.score("Москва выборы", "Москва выборы")["rouge1"].fmeasure == 0
    assert rouge("Москва выборы", "Москва выборы")["rouge1"] == 1.0
