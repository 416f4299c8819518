"""The `length_control` signature of a real export, of a model set by hand.

The model is `scripted.ScriptedModel`: its step's probabilities are a table,
so each headline below, and its score, is worked out before the search runs.
With the export's `search_options.json` the signature must give
`serving_default`'s headlines, and each length setting must do what it says.
"""

import pytest

pytestmark = pytest.mark.tf_only

import dataclasses  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402
import scripted  # noqa: E402
import tensorflow as tf  # noqa: E402

from models.decoding.headline_module import HeadlineModule  # noqa: E402
from models.decoding.tuning import tune_greedy_end_penalty  # noqa: E402
from models.export.saved_model import export as export_model  # noqa: E402

DOCUMENTS = [
    "alpha bravo charlie",
    "delta echo foxtrot golf hotel india",
    # At `maybe` the end token is nearly as likely as the word: the length
    # penalty decides between the short headline and the long one.
    "alpha maybe bravo charlie",
    "golf hotel",
]
DEFAULTS = [
    "alpha bravo charlie",
    "delta echo foxtrot golf hotel",
    "alpha",
    "golf hotel",
]
MAX_LENGTH = scripted.OPTIONS.max_length
# Settings, then the headlines they must give. Each headline's score is
# checked against the table too (`expected_scores`).
CASES = [
    ({}, DEFAULTS),
    # Beyond the export's max_length is clipped to it.
    ({"max_length": 50}, DEFAULTS),
    # A minimum of 5 (the export's max_length) binds on the short headlines,
    # which then take the likeliest word past the source's end; the long
    # one's stays as it was.
    (
        {"min_length": 5},
        [
            "alpha bravo charlie filler filler",
            "delta echo foxtrot golf hotel",
            "alpha maybe bravo charlie filler",
            "golf hotel filler filler filler",
        ],
    ),
    # A minimum above the maximum is clipped to it.
    (
        {"min_length": 9},
        [
            "alpha bravo charlie filler filler",
            "delta echo foxtrot golf hotel",
            "alpha maybe bravo charlie filler",
            "golf hotel filler filler filler",
        ],
    ),
    ({"max_length": 1}, ["alpha", "delta", "alpha", "golf"]),
    # Cut at 2, the end token forced in at a word (0.2) scores below ending
    # after the first word: only the two-word document writes two.
    ({"max_length": 2}, ["alpha", "delta", "alpha", "golf hotel"]),
    # min_length above max_length is clipped to it: exactly 2 tokens.
    (
        {"min_length": 4, "max_length": 2},
        ["alpha bravo", "delta echo", "alpha maybe", "golf hotel"],
    ),
    # No penalty favours the short headline; a penalty of 2 the long one.
    ({"length_penalty": 0.0}, DEFAULTS),
    (
        {"length_penalty": 2.0},
        [
            "alpha bravo charlie",
            "delta echo foxtrot golf hotel",
            "alpha maybe bravo charlie",
            "golf hotel",
        ],
    ),
]


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """`(call, defaults)`: `call(signature, **settings)` runs the export."""
    version = export_model(
        scripted.ScriptedModel(),
        scripted.features(),
        tmp_path_factory.mktemp("export"),
        options=scripted.OPTIONS,
    )
    model = tf.saved_model.load(str(version))
    defaults = json.loads((version / "search_options.json").read_text())
    docs = tf.constant(DOCUMENTS)

    def call(signature="length_control", **settings):
        fn = model.signatures[signature]
        if signature != "length_control":
            return fn(documents=docs)
        settings = {
            k: settings.get(k, defaults[k])
            for k in ("min_length", "max_length", "length_penalty")
        }
        return fn(
            documents=docs,
            min_length=tf.constant(settings["min_length"], tf.int32),
            max_length=tf.constant(settings["max_length"], tf.int32),
            length_penalty=tf.constant(settings["length_penalty"], tf.float32),
        )

    return call, defaults


def expected_scores(headlines, length_penalty):
    """Each headline's log-probability from the table over GNMT's penalty."""
    scores = []
    for document, headline in zip(DOCUMENTS, headlines, strict=True):
        n = len(headline.split())
        # A headline cut at the export's max_length has no end token; the
        # penalty counts the scored tokens, the end token included.
        ended = n < MAX_LENGTH
        log_prob = scripted.expected_log_prob(document, headline, ended)
        scores.append(log_prob / ((5.0 + n + ended) / 6.0) ** length_penalty)
    return np.array(scores)


def _strings(tensor):
    return [h.decode() for h in tensor.numpy()]


def test_the_export_holds_the_scripted_defaults(export):
    _, defaults = export
    assert defaults["max_length"] == MAX_LENGTH == 5
    assert (defaults["min_length"], defaults["length_penalty"]) == (1, 1.0)


@pytest.mark.parametrize(
    "settings, headlines", CASES, ids=[str(s or "defaults") for s, _ in CASES]
)
def test_each_setting_gives_the_headlines_worked_out_by_hand(
    export, settings, headlines
):
    call, defaults = export
    out = call(**settings)
    assert _strings(out["normalized_headlines"]) == headlines
    alpha = settings.get("length_penalty", defaults["length_penalty"])
    np.testing.assert_allclose(
        out["scores"].numpy(), expected_scores(headlines, alpha), rtol=1e-5
    )


def test_defaults_give_the_serving_default_headlines(export):
    call, _ = export
    controlled, beam = call(), call("serving_default")
    assert _strings(beam["normalized_headlines"]) == DEFAULTS
    for key in ("headlines", "normalized_headlines"):
        np.testing.assert_array_equal(controlled[key].numpy(), beam[key].numpy())
    # The penalty is a tensor here, a constant there: the last bit may differ.
    np.testing.assert_allclose(
        controlled["scores"].numpy(), beam["scores"].numpy(), rtol=1e-6
    )


# Greedy search with `greedy_end_penalty`: past the source the end token
# (0.6) leads the filler (0.3) by log 2 = 0.69, so a penalty above that
# writes the filler; at a source word the word already leads the end token
# (0.7 against 0.2; 0.5 against 0.4 at `maybe`), and a penalty only widens
# its lead.
PADDED = [
    "alpha bravo charlie filler filler",
    "delta echo foxtrot golf hotel",
    "alpha maybe bravo charlie filler",
    "golf hotel filler filler filler",
]
GREEDY = ["alpha bravo charlie", DEFAULTS[1], "alpha maybe bravo charlie", "golf hotel"]


@pytest.mark.parametrize(
    "penalty, headlines", [(0.0, GREEDY), (0.5, GREEDY), (1.0, PADDED)]
)
def test_greedy_end_penalty_gives_the_headlines_worked_out_by_hand(penalty, headlines):
    options = dataclasses.replace(scripted.OPTIONS, greedy_end_penalty=penalty)
    module = HeadlineModule(scripted.ScriptedModel(), scripted.features(), options)
    docs = tf.constant(DOCUMENTS)
    assert _strings(module.greedy(docs)["normalized_headlines"]) == headlines
    # Greedy search's lever: the beam's headlines stay the defaults.
    assert _strings(module.beam(docs)["normalized_headlines"]) == DEFAULTS


def test_one_greedy_trace_serves_every_end_penalty():
    """`search(end_penalty=...)` with a tensor: the headlines of each
    penalty, worked out above, from one traced graph (tuning's grid)."""
    module = HeadlineModule(
        scripted.ScriptedModel(), scripted.features(), scripted.OPTIONS
    )
    search = tf.function(
        lambda d, p: module.search(d, 1, end_penalty=p)["normalized_headlines"],
        autograph=False,
    )
    docs = tf.constant(DOCUMENTS)
    for penalty, headlines in [(0.0, GREEDY), (1.0, PADDED), (0.5, GREEDY)]:
        assert _strings(search(docs, tf.constant(penalty))) == headlines
    assert search.experimental_get_tracing_count() == 1


def test_the_greedy_end_penalty_is_chosen_by_rouge_on_validation():
    chosen, rows = tune_greedy_end_penalty(
        scripted.ScriptedModel(),
        scripted.features(),
        DOCUMENTS,
        PADDED,  # the references: the long headlines
        scripted.OPTIONS,
        [0.0, 1.0],
    )
    assert chosen == dataclasses.replace(scripted.OPTIONS, greedy_end_penalty=1.0)
    assert [r["greedy_end_penalty"] for r in rows] == [0.0, 1.0]
    assert [r["mean_length"] for r in rows] == [3.5, 5.0]
    assert rows[1]["rouge1"] == pytest.approx(100.0)
    assert rows[0]["rouge1"] < rows[1]["rouge1"]


@pytest.mark.parametrize("target, penalty", [(3.6, 0.0), (4.4, 1.0), (9.0, 1.0)])
def test_a_target_length_chooses_the_nearest_mean_length(target, penalty):
    # Mean lengths 3.5 and 5.0 (above): the nearest wins, whatever ROUGE says.
    chosen, _ = tune_greedy_end_penalty(
        scripted.ScriptedModel(),
        scripted.features(),
        DOCUMENTS,
        PADDED,
        scripted.OPTIONS,
        [0.0, 1.0],
        target_length=target,
    )
    assert chosen.greedy_end_penalty == penalty
