"""The `length_control` signature of a real export: the `trained` fixture's.

Its defaults are the export's `search_options.json`; with them it must give
`serving_default`'s headlines, and each length setting must do what it says.
"""

import pytest

pytestmark = [pytest.mark.tf_only, pytest.mark.slow]

import json  # noqa: E402

import numpy as np  # noqa: E402
from e2e import WORDS  # noqa: E402


# Session scope: built once per worker process, whatever order the worker
# runs the tests in.
@pytest.fixture(scope="session")
def export(trained):
    """`(call, defaults)`: `call(**settings)` runs `length_control`."""
    import tensorflow as tf

    tmp_path, _ = trained
    version = tmp_path / "export" / "1"
    model = tf.saved_model.load(str(version))
    defaults = json.loads((version / "search_options.json").read_text())
    rng = np.random.default_rng(7)
    docs = tf.constant(
        [" ".join(rng.choice(WORDS, size=rng.integers(6, 14))) for _ in range(16)]
    )

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


def _lengths(out):
    """Tokens of each headline (reserved ids are banned: none prints empty)."""
    return (out["headline_tokens"].numpy() != b"").sum(axis=1)


def test_defaults_give_the_serving_default_headlines(export):
    call, defaults = export
    assert defaults["max_length"] == 5 and defaults["min_length"] == 1
    controlled, beam = call(), call("serving_default")
    for key in ("headlines", "normalized_headlines"):
        np.testing.assert_array_equal(controlled[key].numpy(), beam[key].numpy())
    # The penalty is a tensor here, a constant there: the last bit may differ.
    np.testing.assert_allclose(
        controlled["scores"].numpy(), beam["scores"].numpy(), rtol=1e-6
    )
    # Beyond the export's max_length is clipped to it.
    np.testing.assert_array_equal(
        call(max_length=50)["headlines"].numpy(), beam["headlines"].numpy()
    )


def test_a_longer_minimum_lengthens_only_the_short_headlines(export):
    call, _ = export
    # The tiny model's default headlines have 4 or 5 tokens: a minimum of 5
    # (the export's max_length) binds on some and not on the others.
    default, longer = call(), call(min_length=5)
    before, after = _lengths(default), _lengths(longer)
    assert (after == 5).all(), after
    assert (before < 5).any(), "no short default headline: the test checks nothing"
    not_binding = before == 5
    assert not_binding.any()
    np.testing.assert_array_equal(
        longer["headlines"].numpy()[not_binding],
        default["headlines"].numpy()[not_binding],
    )
    # A minimum above the maximum is clipped to it.
    np.testing.assert_array_equal(
        call(min_length=9)["headlines"].numpy(), longer["headlines"].numpy()
    )


def test_max_length_caps_the_headlines(export):
    call, _ = export
    for cap in (1, 2):
        lengths = _lengths(call(max_length=cap))
        assert lengths.max() == cap and (lengths >= 1).all(), lengths
    # min_length above max_length is clipped to it: exactly `cap` tokens.
    assert (_lengths(call(min_length=4, max_length=2)) == 2).all()


def test_length_penalty_changes_the_ranking_only_through_the_score(export):
    call, defaults = export
    raw, favoured = call(length_penalty=0.0), call(length_penalty=2.0)

    def log_probs(out, alpha):
        # GNMT's penalty over the scored tokens: the end token included,
        # except for a headline cut at max_length.
        n = np.minimum(_lengths(out) + 1, defaults["max_length"])
        return out["scores"].numpy() * ((5.0 + n) / 6.0) ** alpha

    same = raw["headlines"].numpy() == favoured["headlines"].numpy()
    assert same.any()
    # Where the same headline wins, its log-probability is the same: only
    # the score that ranks it is divided by the penalty.
    np.testing.assert_allclose(
        log_probs(favoured, 2.0)[same], raw["scores"].numpy()[same], rtol=1e-5
    )
    # Dividing a negative log-probability by a penalty above 1 raises it.
    assert (favoured["scores"].numpy()[same] > raw["scores"].numpy()[same]).all()
