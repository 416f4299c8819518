"""The worked example of docs/deploy.md (`examples/deploy_beam_search.py`):
a trained attention decoder's beam search, exported to ONNX and LiteRT, gives
Keras' ids in a process without TensorFlow."""

import numpy as np
import pytest

from examples import deploy_beam_search as example

pytestmark = [pytest.mark.tf_only, pytest.mark.slow]


def test_the_exported_beam_search_decodes_as_keras_without_tensorflow(tmp_path):
    expected = example.export(tmp_path, pairs=256, epochs=2)
    assert expected["losses"][-1] < expected["losses"][0]
    got = example.run_elsewhere(str(tmp_path))
    assert got["tensorflow_imported"] is False
    for format in example.FILES:
        np.testing.assert_array_equal(got[format]["ids"], expected["ids"])
        np.testing.assert_array_equal(got[format]["lengths"], expected["lengths"])
        np.testing.assert_allclose(got[format]["scores"], expected["scores"], atol=1e-5)
    assert expected["ids"].shape == (example.LITERT_BATCH, 9)
