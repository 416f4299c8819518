"""Lengths from the data (`models.training.chosen_lengths`), the lead
baseline's N, and the check of a trained model against that baseline
(`models.decoding.lead_check`)."""

import pytest

pytestmark = pytest.mark.tf_only

import io  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from models import data  # noqa: E402
from models.decoding import lead_check, tuning  # noqa: E402
from models.scoring.baselines import (  # noqa: E402
    LEAD_WORDS,
    choose_lead_tokens,
    recorded_lead_tokens,
)
from models.settings.data import DataSource  # noqa: E402
from models.settings.model import SummarizerConfig  # noqa: E402
from models.settings.search import SearchOptions  # noqa: E402
from models.training import chosen_lengths as lengths  # noqa: E402


def _split(pairs):
    documents, summaries = zip(*pairs, strict=True)
    return tf.data.Dataset.from_tensor_slices((list(documents), list(summaries)))


# ------------------------------------------------------------------ the rule


def test_length_limit_is_the_percentile_with_headroom_to_a_multiple_of_four():
    # 99th percentile 50: 62.5, rounded up to 64 (Gigaword's source).
    assert lengths.length_limit([10] * 980 + [50] * 15 + [78] * 5, (16, 400)) == 64
    # 15 (14 tokens and </s>): 18.75, rounded up to 20 (Gigaword's headline).
    assert lengths.length_limit([9] * 985 + [15] * 10 + [26] * 5, (8, 100)) == 20
    # Five long outliers in a thousand do not move it.
    assert lengths.length_limit([12] * 995 + [500] * 5, (16, 400)) == 16
    # Floors and ceilings.
    assert lengths.length_limit([2] * 100, (8, 100)) == 8
    assert lengths.length_limit([900] * 100, (16, 400)) == 400
    with pytest.raises(ValueError, match="`lengths` must hold"):
        lengths.length_limit([], (8, 100))


def test_lead_tokens_is_the_rounded_median():
    assert choose_lead_tokens([3, 8, 8, 9, 30]) == 8
    assert choose_lead_tokens([7, 8]) == 8  # 7.5 rounds up
    assert choose_lead_tokens([0, 0, 1]) == 1  # never below 1
    with pytest.raises(ValueError, match="reference_lengths"):
        choose_lead_tokens([])


def test_latin_lengths_are_counted_in_the_models_tokens():
    split = _split(
        [("Japan's NEC Corp. said it would cut 2,500 jobs.", "NEC to cut jobs")] * 3
    )
    source, target, reference = data.measure_lengths(split, "general", sample=2)
    # `Japan 's NEC Corp. said it would cut 2,500 jobs .`: 11 tokens.
    assert source.tolist() == [11, 11]
    assert target.tolist() == [4, 4]
    assert reference.tolist() == [4, 4]


def test_cjk_lengths_are_counted_a_character_a_token():
    split = _split([("東京株式市場が上昇した。Tokyo 500", "東京株式が上昇")])
    source, target, reference = data.measure_lengths(split, "general", sample=10)
    # 12 characters (the `。` too), then `Tokyo` and `500` whole.
    assert source.tolist() == [14]
    assert target.tolist() == [7]
    assert reference.tolist() == [7]


def test_cjk_headlines_get_longer_limits_than_latin_words():
    config = SummarizerConfig()
    # Headlines of 30 characters: the 99th percentile is 31 with </s>.
    record = lengths.choose_lengths(
        np.full(100, 214), np.full(100, 30), np.full(100, 30), config
    )
    assert (record["max_source_length"], record["max_target_length"]) == (268, 40)
    assert record["lead_tokens"] == 30
    assert record["chosen"] == {
        "max_source_length": "data",
        "max_target_length": "data",
    }


def test_given_lengths_are_kept():
    config = SummarizerConfig(max_target_length=6)
    record = lengths.choose_lengths(
        np.full(10, 50), np.full(10, 14), np.full(10, 14), config
    )
    assert (record["max_source_length"], record["max_target_length"]) == (64, 6)
    assert record["chosen"]["max_target_length"] == "given"


def test_a_new_run_records_its_lengths_and_a_resumed_run_keeps_them(tmp_path, capsys):
    run_dir = tmp_path / "run"
    split = _split([("a b c d e f g h i j", "a b c")] * 5)
    config, _ = lengths.settle_config(
        run_dir, split, DataSource(), SummarizerConfig(), SearchOptions()
    )
    assert (config.max_source_length, config.max_target_length) == (16, 8)
    line = capsys.readouterr().err.strip()
    assert line.startswith("Lengths: source 16 tokens") and "\n" not in line
    assert "lead baseline 3 tokens" in line
    assert recorded_lead_tokens(run_dir) == 3
    # Resumed: the run's config.json and lengths.json, whatever the data.
    SummarizerConfig(max_source_length=24, max_target_length=12).save(
        run_dir / "config.json"
    )
    longer = _split([(" ".join(["w"] * 300), " ".join(["w"] * 50))] * 5)
    config, _ = lengths.settle_config(
        run_dir, longer, DataSource(), SummarizerConfig(), SearchOptions()
    )
    assert recorded_lead_tokens(run_dir) == 3
    assert "(kept from the run)" in capsys.readouterr().err
    # An export without the record: the old baseline.
    assert recorded_lead_tokens(tmp_path) == LEAD_WORDS


def test_the_search_limit_follows_the_headline_length(tmp_path, capsys):
    split = _split([("a b c d e f g h i j", "a b c")] * 5)
    config = SummarizerConfig(max_target_length=40)
    unset = SearchOptions(max_length=None)
    _, search = lengths.settle_config(tmp_path, split, DataSource(), config, unset)
    assert search.max_length == 40
    given = SearchOptions(max_length=20)
    _, search = lengths.settle_config(tmp_path, split, DataSource(), config, given)
    assert search.max_length == 20


# ------------------------------------------------------- the validation check


LOOP = {"rouge1": 30.22, "rouge2": 3.13, "rougeL": 19.21}
LEAD = {"rouge1": 27.52, "rouge2": 12.47, "rougeL": 25.28}


def test_a_model_must_beat_the_baseline_on_all_three_metrics():
    check = lead_check.compare(LOOP, LEAD, 8, 500)
    assert check["beats_lead_baseline"] is False  # ROUGE-1 alone is not enough
    assert check["baseline"] == "lead_8"
    assert check["model"] == LOOP and check["lead_baseline"] == LEAD
    better = {k: v + 1 for k, v in LEAD.items()}
    assert lead_check.compare(better, LEAD, 8, 500)["beats_lead_baseline"] is True
    tie = {**better, "rougeL": LEAD["rougeL"]}
    assert lead_check.compare(tie, LEAD, 8, 500)["beats_lead_baseline"] is False


def test_the_last_lines_say_what_it_scored_and_what_to_try():
    out = io.StringIO()
    lead_check.print_verdict(lead_check.compare(LOOP, LEAD, 8, 500), file=out)
    first, second = out.getvalue().splitlines()
    assert first.startswith("[train.py] NOT TRAINED ENOUGH: the model does not beat")
    assert "30.22 / 3.13 / 19.21" in first and "27.52 / 12.47 / 25.28" in first
    assert "lead_8" in first and "500 validation examples" in first
    for hint in ("more data", "--min-train-examples", "--max-source-length"):
        assert hint in second
    out = io.StringIO()
    better = {k: v + 1 for k, v in LEAD.items()}
    lead_check.print_verdict(lead_check.compare(better, LEAD, 8, 500), file=out)
    assert out.getvalue().startswith("[train.py] beats the lead baseline: R1/R2/RL")
    assert len(out.getvalue().splitlines()) == 1


def test_validation_check_scores_the_lead_on_the_same_pairs():
    documents = [b"a b c d e", "x y z w v"]
    references = ["a b", "x y"]
    check = lead_check.validation_check(documents, references, LOOP, 2)
    assert check["lead_baseline"] == {"rouge1": 100.0, "rouge2": 100.0, "rougeL": 100.0}
    assert (check["examples"], check["baseline"]) == (2, "lead_2")
    assert not check["beats_lead_baseline"]


def test_a_setting_at_the_maximum_length_is_flagged():
    rows = [
        {
            "length_penalty": 1.0,
            "no_repeat_ngram_size": 0,
            "rouge1": 20.0,
            "mean_length": 19.5,
            "at_max_length": True,
        },
        {
            "length_penalty": 2.0,
            "no_repeat_ngram_size": 0,
            "rouge1": 10.0,
            "mean_length": 9.0,
            "at_max_length": False,
        },
    ]
    looping = SearchOptions(length_penalty=1.0, no_repeat_ngram_size=0)
    table = tuning.format_rows(rows, looping)
    assert table.splitlines()[-1].startswith("note: the chosen setting's headlines")
    assert "19.5 tokens, at the maximum length (20)" in table
    fine = SearchOptions(length_penalty=2.0, no_repeat_ngram_size=0)
    assert "note:" not in tuning.format_rows(rows, fine)
    assert tuning.served_row(rows, None, looping) is rows[0]
    greedy = [{"greedy_end_penalty": 0.0, "at_max_length": False}]
    one_beam = SearchOptions(beam_size=1, length_penalty=1.0, no_repeat_ngram_size=0)
    assert tuning.served_row(rows, greedy, one_beam) is greedy[0]
    json.dumps(rows)  # the record stays JSON
