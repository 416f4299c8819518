"""TFA's NMT tutorial ported to keras_attn (`examples/tfa_nmt_tutorial.py`)
learns its toy language pair on the suite's backend, decodes greedily and
with a beam of 3, survives saving and reloading, and ignores padding.

The model is the example's at half its width, trained for 128 steps: enough
for most held-out sentences to come out exactly, where chance is about
`15 ** -5`.
"""

import keras
import numpy as np
import pytest
from keras import ops

from examples import tfa_nmt_tutorial as nmt

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained():
    keras.utils.set_random_seed(0)
    model = nmt.build_model(units=32, embedding_dim=16)
    pairs = nmt.make_pairs(2048, seed=1)
    losses = nmt.train(model, pairs, epochs=4, batch_size=64)
    seen = {tuple(row) for row in pairs[0]}
    sources, decoder_inputs, targets = nmt.make_pairs(300, seed=2)
    new = np.array([tuple(row) not in seen for row in sources])
    held_out = sources[new], decoder_inputs[new], targets[new]
    return model, losses, held_out


def _numpy(result):
    return ops.convert_to_numpy(result.ids), ops.convert_to_numpy(result.log_probs)


def test_it_learns_and_beam_3_is_not_below_greedy(trained):
    model, losses, (sources, _, targets) = trained
    assert len(sources) >= 200
    assert losses[-1] < 0.3 * losses[0]
    translator = nmt.Translator(model)
    greedy = translator.greedy(sources)
    beam = translator.beam(sources, beam_size=3)
    greedy_match = nmt.exact_match(greedy, targets)
    assert greedy_match >= 0.6
    assert nmt.exact_match(beam, targets) >= greedy_match
    # With no length penalty a beam ranks by the summed log-probability: on
    # average it finds hypotheses at least as likely as the greedy ones.
    assert np.mean(_numpy(beam)[1]) >= np.mean(_numpy(greedy)[1]) - 1e-4


def test_a_reloaded_model_decodes_the_same_ids(trained, tmp_path):
    model, _, (sources, _, _) = trained
    sources = sources[:32]
    path = tmp_path / "nmt.keras"
    model.save(path)
    reloaded = nmt.Translator(keras.saving.load_model(path))
    translator = nmt.Translator(model)
    for decode in ("greedy", "beam"):
        ids, log_probs = _numpy(getattr(translator, decode)(sources))
        again, again_log_probs = _numpy(getattr(reloaded, decode)(sources))
        np.testing.assert_array_equal(again, ids)
        np.testing.assert_allclose(again_log_probs, log_probs, atol=1e-5)


def test_padding_appended_to_the_sources_changes_nothing(trained):
    model, _, (sources, decoder_inputs, _) = trained
    sources, decoder_inputs = sources[:32], decoder_inputs[:32]
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
