"""The lead guard holds a model against the strongest lead baseline: the
first-N-tokens baseline with the best mean of ROUGE-1/2/L on validation, for
N around the training headlines' median (`models.decoding.lead_check`); the export
records that N and the test split is scored against it
(`models.scoring.baselines.chosen_lead_tokens`). Scores by hand."""

import pytest

pytestmark = pytest.mark.tf_only

import json  # noqa: E402

from models.decoding import lead_check  # noqa: E402
from models.scoring.baselines import LEAD_WORDS, chosen_lead_tokens  # noqa: E402

# Each headline is its document's words 2-5: the median length, 4, leaves the
# first word in and the fifth out; N = 5 takes all four and one word more.
DOCUMENTS = ["x a b c d y z w", "q e f g h r s t"]
REFERENCES = ["a b c d", "e f g h"]
# N = 4: 3 of 4 words (F 0.75), 2 of 3 bigrams (F 2/3), LCS 3 (F 0.75).
LEAD_4 = {"rouge1": 75.0, "rouge2": 200 / 3, "rougeL": 75.0}
# N = 5: precision 4/5 and recall 1 (F 8/9); bigrams 3/4 and 1 (F 6/7).
LEAD_5 = {"rouge1": 800 / 9, "rouge2": 600 / 7, "rougeL": 800 / 9}
# N = 6: precision 4/6 and recall 1 (F 0.8); bigrams 3/5 and 1 (F 0.75).
LEAD_6 = {"rouge1": 80.0, "rouge2": 75.0, "rougeL": 80.0}


def _mean(scores):
    return sum(scores.values()) / 3


def test_the_ns_tried_run_from_half_the_median_to_twice_it():
    assert list(lead_check.lead_candidates(8)) == list(range(4, 17))
    assert list(lead_check.lead_candidates(2)) == [1, 2, 3, 4]
    assert list(lead_check.lead_candidates(1)) == [1, 2]


def test_the_strongest_lead_has_the_best_mean_of_the_three():
    n, scores, means = lead_check.strongest_lead(
        DOCUMENTS, REFERENCES, lead_check.lead_candidates(4)
    )
    assert n == 5
    assert scores == pytest.approx(LEAD_5)
    assert list(means) == list(range(2, 9))
    for tokens, expected in ((4, LEAD_4), (5, LEAD_5), (6, LEAD_6)):
        assert means[tokens] == pytest.approx(_mean(expected))
    assert max(means.values()) == means[5]


def test_a_tie_keeps_the_first_n():
    # A two-word document: every N from 2 on is the whole document.
    n, scores, means = lead_check.strongest_lead(["a b"], ["a b"], [3, 2, 4])
    assert n == 3 and means == {3: 100.0, 2: 100.0, 4: 100.0}
    with pytest.raises(ValueError, match="Received: none"):
        lead_check.strongest_lead(["a b"], ["a b"], [])


def test_the_check_holds_the_model_against_the_strongest_lead():
    # Ahead of the median's lead_4 on all three, behind lead_5 on ROUGE-1.
    model = {"rouge1": 80.0, "rouge2": 80.0, "rougeL": 80.0}
    check = lead_check.validation_check(DOCUMENTS, REFERENCES, model, 4)
    assert (check["baseline"], check["lead_tokens"]) == ("lead_5", 5)
    assert check["lead_baseline"] == {k: round(v, 2) for k, v in LEAD_5.items()}
    assert check["beats_lead_baseline"] is False
    assert check["lead_choice"]["lead_4"] == round(_mean(LEAD_4), 2)
    assert max(check["lead_choice"], key=check["lead_choice"].get) == "lead_5"
    assert "first 5 tokens, the strongest such N" in lead_check.verdict_lines(check)[0]
    better = {k: v + 1 for k, v in LEAD_5.items()}
    assert lead_check.validation_check(DOCUMENTS, REFERENCES, better, 4)[
        "beats_lead_baseline"
    ]


def test_the_export_records_the_chosen_n(tmp_path):
    assert chosen_lead_tokens(tmp_path) == LEAD_WORDS
    (tmp_path / "lengths.json").write_text(json.dumps({"lead_tokens": 4}))
    assert chosen_lead_tokens(tmp_path) == 4
    # An export made before the N was chosen: the median's.
    record = {"validation_check": {"baseline": "lead_4"}}
    (tmp_path / "training.json").write_text(json.dumps(record))
    assert chosen_lead_tokens(tmp_path) == 4
    record["validation_check"]["lead_tokens"] = 5
    (tmp_path / "training.json").write_text(json.dumps(record))
    assert chosen_lead_tokens(tmp_path) == 5
