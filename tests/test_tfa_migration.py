"""The docs' "Migrating from tfa.seq2seq" example runs, on every backend.

The first code block of docs/tfa-migration.md is `examples/tfa_migration.py`
between its markers, character for character, so running the file proves
the page.
"""

import importlib.util
from pathlib import Path

import numpy as np
from keras import ops

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "tfa_migration.py"


def _example_code():
    text = EXAMPLE.read_text()
    return text.split("# README begin\n", 1)[1].split("# README end\n", 1)[0]


def test_the_docs_show_the_example():
    page = (ROOT / "docs" / "tfa-migration.md").read_text()
    block = page.split("```python\n", 1)[1].split("```\n", 1)[0]
    assert block == _example_code().rstrip() + "\n"


def _load_example():
    spec = importlib.util.spec_from_file_location("tfa_migration", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


def test_sequence_loss_is_tfas():
    # TFA's default: sum(cross_entropy * weights) / sum(weights), in numpy.
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 3, 5)).astype("float32")
    targets = rng.integers(0, 5, (2, 3))
    weights = np.array([[1, 1, 0], [1, 0, 0]], "float32")
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    cross_entropy = -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0]
    expected = (cross_entropy * weights).sum() / weights.sum()
    loss = _load_example().sequence_loss(targets, logits, sample_weight=weights)
    np.testing.assert_allclose(float(ops.convert_to_numpy(loss)), expected, rtol=1e-5)


def test_example_trains_and_beam_searches():
    example = _load_example()
    losses = example.train(steps=8)
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]

    src = example.reverse_task(3, np.random.default_rng(1))[0]
    result = example.translate(src, beam_size=3, max_length=8)
    ids, lengths = (
        ops.convert_to_numpy(result.ids),
        ops.convert_to_numpy(result.lengths),
    )
    assert ids.shape == (3, 8) and np.all((lengths >= 0) & (lengths <= 8))
    for row, length in zip(ids, lengths, strict=True):
        assert np.all(row[length:] == example.END)
    assert np.all(np.isfinite(ops.convert_to_numpy(result.scores)))
    # The attention of each step comes back as the search's extras: a
    # distribution over the source's real tokens, zero on its padding (and
    # zero from the end step on).
    attention = ops.convert_to_numpy(result.extras)
    assert attention.shape == (3, 8, src.shape[1])
    for row in range(3):
        steps = attention[row, : lengths[row]]
        np.testing.assert_allclose(steps.sum(-1), 1.0, atol=1e-5)
        assert np.all(steps[:, src[row] == example.PAD] == 0.0)
        assert np.all(attention[row, lengths[row] :] == 0.0)
