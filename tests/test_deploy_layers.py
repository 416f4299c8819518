"""Every layer family through `Model.export`: ONNX, LiteRT (builtin ops) and
OpenVINO (f32) give Keras' outputs within 1e-5 on a padded batch, with the
option tests/deploy_cases.py names; without it (or where a family cannot
run), the runtime's own message."""

import numpy as np
import pytest
from deploy_cases import BUILTINS, CASES, FIXED_BATCH, LOWEST, SEARCHES, UNROLL
from deploy_runtimes import EXTENSIONS, RUNNERS

pytestmark = pytest.mark.tf_only

LAYER_CASES = [c for c in CASES if c.family not in SEARCHES]


def _export(c, tmp_path, unroll, fixed_batch):
    """Exports `c.family`'s model in `c.format`; returns `(path, inputs,
    Keras' outputs)`."""
    import tensorflow as tf
    from deploy_layers import build
    from keras import ops

    model, inputs = build(c.family, unroll=unroll)
    expected = {k: ops.convert_to_numpy(v) for k, v in model(inputs).items()}
    options = {}
    if BUILTINS in c.option:
        options["target_spec"] = {"supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS]}
    if fixed_batch:
        spec = [
            tf.TensorSpec(inputs[x.name].shape, x.dtype, name=x.name)
            for x in model.inputs
        ]
        options["input_signature"] = [spec]
    path = str(tmp_path / f"model{EXTENSIONS[c.format]}")
    model.export(path, format=c.format, verbose=False, **options)
    return path, inputs, expected


def _with_option(c, tmp_path):
    return _export(c, tmp_path, UNROLL in c.option, FIXED_BATCH in c.option)


@pytest.mark.slow
@pytest.mark.parametrize("c", LAYER_CASES, ids=lambda c: f"{c.family}-{c.format}")
def test_family_runs_as_keras_does(c, tmp_path):
    if not c.runs:
        with pytest.raises(Exception, match=c.message):
            path, inputs, _ = _with_option(c, tmp_path)
            RUNNERS[c.format](path, inputs)
        return
    path, inputs, expected = _with_option(c, tmp_path)
    got = RUNNERS[c.format](path, inputs)
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        if LOWEST in c.option:
            value = np.where(np.isneginf(value), np.finfo("float32").min, value)
        np.testing.assert_allclose(got[name], value, atol=1e-5, rtol=0, err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize(
    "c",
    [c for c in LAYER_CASES if c.runs and c.message],
    ids=lambda c: f"{c.family}-{c.format}",
)
def test_without_the_option_the_runtime_says_why(c, tmp_path):
    """A recurrent loop not unrolled is a `TensorList` loop, which LiteRT's
    builtins and OpenVINO's converter do not hold."""
    with pytest.raises(Exception, match=c.message):
        path, inputs, _ = _export(c, tmp_path, unroll=False, fixed_batch=False)
        RUNNERS[c.format](path, inputs)
