"""The searches exported: greedy, beam and sampling search over an attention
decoder's step, as `tf.function`s converted to ONNX, LiteRT and OpenVINO,
give Keras' ids on a padded batch (the cases of tests/deploy_cases.py)."""

import os

import numpy as np
import pytest
from deploy_cases import FIXED_BATCH, SEARCHES, case
from deploy_runtimes import EXTENSIONS, RUNNERS

pytestmark = pytest.mark.tf_only

BATCH = 3


@pytest.fixture(scope="module")
def decoder():
    from deploy_search import make_decoder

    return make_decoder()


@pytest.fixture(scope="module")
def inputs():
    from deploy_search import example_inputs

    memory, memory_mask = example_inputs(BATCH)
    return {"memory": memory, "memory_mask": memory_mask}


def _keras_result(strategy, decoder, inputs):
    """The eager search's ids, lengths and scores."""
    from deploy_search import decoding
    from keras import ops

    result = decoding(strategy, *decoder)(inputs["memory"], inputs["memory_mask"])
    return {k: ops.convert_to_numpy(v) for k, v in result.items()}


def _function(strategy, decoder, batch):
    import tensorflow as tf
    from deploy_search import decoding, signature

    spec = signature(batch)
    return tf.function(decoding(strategy, *decoder), input_signature=spec), spec


def _export(format, function, spec, path):
    """The artifact of `function` in `format`: a path, or for OpenVINO the
    model its TensorFlow front end converts."""
    from deploy_search import to_litert, to_onnx

    if format == "openvino":
        import openvino

        return openvino.convert_model(function)
    {"onnx": to_onnx, "litert": to_litert}[format](function, spec, path)
    return path


def _batch_for(c):
    return BATCH if FIXED_BATCH in c.option else None


@pytest.mark.slow
@pytest.mark.parametrize("format", ["onnx", "litert", "openvino"])
@pytest.mark.parametrize("strategy", SEARCHES)
def test_search_runs_as_keras_does(strategy, format, decoder, inputs, tmp_path):
    from deploy_search import by_role

    c = case(strategy, format)
    expected = _keras_result(strategy, decoder, inputs)
    function, spec = _function(strategy, decoder, _batch_for(c))
    path = str(tmp_path / f"search{EXTENSIONS[format]}")
    if not c.runs:
        with pytest.raises(Exception, match=c.message):
            _export(format, function, spec, path)
        return
    outputs = RUNNERS[format](_export(format, function, spec, path), inputs)
    got = by_role(outputs.values())
    np.testing.assert_array_equal(got["ids"], expected["ids"])
    np.testing.assert_array_equal(got["lengths"], expected["lengths"])
    np.testing.assert_allclose(got["scores"], expected["scores"], atol=1e-5)
    # Padding changes the answer: the rows differ (the test sees them).
    assert len({tuple(row) for row in expected["ids"].tolist()}) > 1


@pytest.mark.slow
@pytest.mark.parametrize("strategy", SEARCHES)
def test_without_the_option_the_runtime_says_why(strategy, decoder, inputs, tmp_path):
    """Sampling's seeded draws are a random op unless the batch is fixed
    (then they fold into a constant)."""
    c = case(strategy, "onnx")
    if not c.message:
        assert FIXED_BATCH not in c.option
        return
    function, spec = _function(strategy, decoder, None)
    path = str(tmp_path / "search.onnx")
    _export("onnx", function, spec, path)
    with pytest.raises(Exception, match=c.message):
        RUNNERS["onnx"](path, inputs)
    assert os.path.getsize(path) > 0
