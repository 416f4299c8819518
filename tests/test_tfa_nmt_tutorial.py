"""TFA's NMT tutorial ported to keras_attn (`examples/tfa_nmt_tutorial.py`)
learns its toy language pair on the suite's backend, decodes greedily and
with a beam of 3, survives saving and reloading, and ignores padding.

The tutorial runs end to end at half its width, trained for 128 steps:
enough for most held-out sentences to come out exactly, where chance is
about `15 ** -5`.
"""

import numpy as np
import pytest
from keras import ops

from examples import tfa_nmt_tutorial as nmt

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tutorial():
    return nmt.run(pairs=2048, epochs=4, units=32, held_out=300)


def _numpy(result):
    return ops.convert_to_numpy(result.ids), ops.convert_to_numpy(result.log_probs)


def test_it_learns_and_beam_3_is_not_below_greedy(tutorial):
    assert len(tutorial.sources) >= 200  # held out: none seen in training
    assert tutorial.losses[-1] < 0.3 * tutorial.losses[0]
    greedy_match = nmt.exact_match(tutorial.greedy, tutorial.targets)
    assert greedy_match >= 0.6
    assert nmt.exact_match(tutorial.beam, tutorial.targets) >= greedy_match
    # With no length penalty a beam ranks by the summed log-probability: on
    # average it finds hypotheses at least as likely as the greedy ones.
    beam_log_probs = _numpy(tutorial.beam)[1]
    greedy_log_probs = _numpy(tutorial.greedy)[1]
    assert np.mean(beam_log_probs) >= np.mean(greedy_log_probs) - 1e-4


def test_a_reloaded_model_decodes_the_same_ids(tutorial):
    for decoded, reloaded in (
        (tutorial.greedy, tutorial.reloaded_greedy),
        (tutorial.beam, tutorial.reloaded_beam),
    ):
        ids, log_probs = _numpy(decoded)
        again, again_log_probs = _numpy(reloaded)
        np.testing.assert_array_equal(again, ids)
        np.testing.assert_allclose(again_log_probs, log_probs, atol=1e-5)


def test_padding_appended_to_the_sources_changes_nothing(tutorial):
    model = tutorial.model
    sources = tutorial.sources[:32]
    decoder_inputs = np.concatenate(
        [np.full((32, 1), nmt.START, "int32"), tutorial.targets[:32, :-1]], axis=1
    )
    padded = np.pad(sources, ((0, 0), (0, 5)), constant_values=nmt.PAD)
    # Teacher forcing: the training graph's logits, up to float noise (the
    # padded source's sums run over more, zero-weighted, positions).
    np.testing.assert_allclose(
        ops.convert_to_numpy(model([padded, decoder_inputs])),
        ops.convert_to_numpy(model([sources, decoder_inputs])),
        atol=1e-4,
    )
    translator = nmt.Translator(model)
    for decode in ("greedy", "beam"):
        ids, log_probs = _numpy(getattr(translator, decode)(sources))
        padded_ids, padded_log_probs = _numpy(getattr(translator, decode)(padded))
        np.testing.assert_array_equal(padded_ids, ids)
        np.testing.assert_allclose(padded_log_probs, log_probs, atol=1e-4)
