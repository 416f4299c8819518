"""On torch, Keras' ONNX export (`torch.onnx`) of the layer families runs in
ONNX Runtime within 1e-5 of Keras, or fails with the message
tests/deploy_cases.py gives (`TORCH_ONNX`)."""

import keras
import numpy as np
import pytest
from deploy_cases import TORCH_ONNX
from deploy_layers import build
from deploy_runtimes import run_onnx
from keras import ops

pytestmark = pytest.mark.torch_only


@pytest.mark.slow
@pytest.mark.parametrize("family", list(TORCH_ONNX))
def test_family_runs_in_onnx_runtime_from_torch(family, tmp_path):
    runs, message = TORCH_ONNX[family]
    path = str(tmp_path / "model.onnx")
    if not runs:
        with pytest.raises(ValueError, match=message):
            model, inputs = build(family, unroll=True)
            model.export(path, format="onnx", verbose=False)
        return
    model, inputs = build(family, unroll=True)
    expected = keras.tree.flatten(
        {k: ops.convert_to_numpy(v) for k, v in model(inputs).items()}
    )
    model.export(path, format="onnx", verbose=False)
    # torch.onnx names the outputs by number, in the outputs' flat order.
    got = list(run_onnx(path, inputs).values())
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, atol=1e-5, rtol=0)
