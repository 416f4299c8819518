"""An ensemble decodes with the mean of its members' distributions."""

import numpy as np
import pytest
import tensorflow as tf
from keras import ops
from toy_summarizer import VOCAB, tiny_batch, tiny_config, tiny_summarizers

from models.decoding.headline_module import HeadlineModule
from models.model.ensemble import SummarizerEnsemble
from models.model.summarizer import HeadlineSummarizer
from models.settings.search import SearchOptions
from models.text import RESERVED
from models.text.features import TextFeatures

pytestmark = pytest.mark.tf_only


@pytest.mark.parametrize("overrides", [{}, {"coverage": True}])
def test_step_is_the_mean_distribution_and_attention(overrides):
    members = tiny_summarizers(2, **overrides)
    ensemble = SummarizerEnsemble(members)
    inputs, _ = tiny_batch()
    source, ext = inputs["source_ids"], inputs["source_ext_ids"]
    ids = tf.constant([5, VOCAB + 2, 7])  # an extended (copied) id too
    state, memory = ensemble.initial_decoder_state(source, ext)
    log_probs, new_state, attention = ensemble.step(
        ids, state, memory, ensemble.output_kernel()
    )
    expected_p, expected_attention = 0.0, 0.0
    for member, member_state in zip(members, new_state, strict=True):
        s, m = member.initial_decoder_state(source, ext)
        lp, st, att = member.step(ids, s, m, member.output_kernel())
        expected_p += np.exp(ops.convert_to_numpy(lp)) / 2
        expected_attention += ops.convert_to_numpy(att) / 2
        for got, want in zip(member_state, st, strict=True):
            # each member's state goes on as its own
            np.testing.assert_allclose(
                ops.convert_to_numpy(got), ops.convert_to_numpy(want)
            )
    probs = np.exp(ops.convert_to_numpy(log_probs))
    np.testing.assert_allclose(probs, expected_p, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(
        ops.convert_to_numpy(attention), expected_attention, atol=1e-6
    )


def test_an_ensemble_of_copies_decodes_as_the_member():
    (member,) = tiny_summarizers(1)
    twin = HeadlineSummarizer(tiny_config())
    twin(tiny_batch()[0])
    twin.set_weights(member.get_weights())
    words = list(RESERVED) + [f"w{i}" for i in range(VOCAB - len(RESERVED))]
    features = TextFeatures(words, 7, 5)
    options = SearchOptions(beam_size=3, max_length=5)
    documents = tf.constant(["w1 w2 w3 w4", "w5 w6 zzz w7 w8"])
    outputs = [
        HeadlineModule(model, features, options).search(documents, beam)
        for model in (member, SummarizerEnsemble([member, twin]))
        for beam in (1, 3)
    ]
    for single, ensemble in zip(outputs[:2], outputs[2:], strict=True):
        assert single["headlines"].numpy().tolist() == (
            ensemble["headlines"].numpy().tolist()
        )
        np.testing.assert_allclose(
            single["scores"].numpy(), ensemble["scores"].numpy(), atol=1e-5
        )


def test_an_ensemble_needs_twotiny_summarizers():
    with pytest.raises(ValueError, match="Received: 1 member"):
        SummarizerEnsemble(tiny_summarizers(1))
