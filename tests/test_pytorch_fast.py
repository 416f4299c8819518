"""benchmarks.pytorch_fast: the tutorial's model written for speed computes
the tutorial's function; benchmarks.peer_pytorch_fast's driver parts."""

import io
import json

import numpy as np
import pytest

from benchmarks import peer_pytorch_fast as driver


@pytest.mark.torch_only
def test_the_fast_model_gives_the_tutorials_log_probs_and_greedy_ids():
    import torch

    from benchmarks import peer_pytorch_tutorial as tutorial
    from benchmarks import tutorial_task as task
    from benchmarks.pytorch_fast import FastSeq2Seq, tutorial_greedy

    source, target = task.reversal_pairs(4, vocab=12)
    (encoder, decoder, _), model = tutorial.build_pair(vocab=12)
    fast = FastSeq2Seq.from_tutorial(encoder, decoder).eval()
    source_t, target_t = torch.from_numpy(source), torch.from_numpy(target)
    expected = tutorial.tutorial_forward(encoder, decoder, source_t, target_t)
    inputs = torch.from_numpy(task.decoder_inputs(target))
    with torch.no_grad():
        got = fast(source_t, inputs)
        loss = fast.loss(source_t, inputs, target_t)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-5)
    picked = np.take_along_axis(expected.numpy(), target[..., None], -1)
    np.testing.assert_allclose(loss.item(), -picked.mean(), rtol=1e-5)
    # Greedy decoding: the tutorial's loop, the fast one and keras-attn's
    # search (with the tutorial's weights ported) choose the same ids.
    ids = tutorial_greedy(encoder, decoder, source_t)
    assert ids.shape == (4, task.MAX_LENGTH)
    assert torch.equal(fast.greedy(source_t), ids)
    keras_ids = task.greedy_decoder(model)(source.astype("int32"))
    np.testing.assert_array_equal(np.asarray(keras_ids.cpu()), ids.numpy())


@pytest.mark.torch_only
def test_the_fast_training_step_lowers_the_loss():
    import torch

    from benchmarks import peer_pytorch_tutorial as tutorial
    from benchmarks import tutorial_task as task
    from benchmarks.pytorch_fast import FastSeq2Seq, fast_programs

    torch.manual_seed(0)
    source, target = (torch.from_numpy(a) for a in task.reversal_pairs(8, 12))
    inputs = torch.from_numpy(task.decoder_inputs(target.numpy()))
    fast = FastSeq2Seq.from_tutorial(
        tutorial.EncoderRNN(12, 16), tutorial.AttnDecoderRNN(16, 12)
    )
    train_step, decode = fast_programs(fast, source, inputs, target)
    losses = [train_step() for _ in range(30)]
    assert losses[-1] < losses[0] - 0.1
    assert decode().shape == (8, task.MAX_LENGTH)
    assert fast.training  # decoding leaves it in training mode


def test_serve_answers_each_request_with_seconds_per_call():
    calls = []
    programs = {"fast compiled train": lambda: calls.append(1)}
    replies = io.StringIO()
    driver.serve(programs, replies, io.StringIO("fast compiled train 3\n"))
    ready, seconds = replies.getvalue().splitlines()
    assert json.loads(ready)["ready"] == ["fast compiled train"]
    assert float(seconds) >= 0.0
    assert len(calls) == 2 + 3  # two warm-up calls, then three timed


def test_summarize_takes_medians_and_per_round_ratios():
    times = {
        "fast train": [0.010, 0.020, 0.030],
        "keras-attn jax train": [0.005, 0.030, 0.015],
    }
    summary = driver.summarize(times, ["fast", "keras-attn jax"], kinds=("train",))
    assert summary["train"]["fast"] == {"ms": 20.0, "ratio": 1.0}
    # Medians 20 ms and 15 ms; per-round ratios 0.5, 1.5, 0.5: median 0.5.
    assert summary["train"]["keras-attn jax"] == {"ms": 15.0, "ratio": 0.5}


def test_markdown_has_a_row_a_side():
    side = {"ms": 2.0, "ratio": 1.0}
    table = driver.markdown({"train": {"fast": side}, "decode": {"fast": side}})
    assert table.splitlines()[-1] == "| fast | 2.0 | 1.0 | 2.0 | 1.0 |"


def test_a_side_that_only_trains_has_no_decoding_figures():
    times = {
        "fast train": [0.010, 0.020],
        "fast decode": [0.004, 0.002],
        "keras-attn torch, jit_compile=True train": [0.010, 0.040],
    }
    sides = ["fast", driver.TORCH_JIT_SIDE]
    summary = driver.summarize(times, sides)
    assert list(summary["decode"]) == ["fast"]
    assert summary["train"][driver.TORCH_JIT_SIDE] == {"ms": 25.0, "ratio": 1.5}
    assert driver.markdown(summary).splitlines()[-1] == (
        "| keras-attn torch, jit_compile=True | 25.0 | 1.5 | - | - |"
    )


def test_workers_are_known():
    assert driver.side_names("jax") == ("keras-attn jax",)
    assert driver.side_names("torch") == ("keras-attn torch", driver.TORCH_JIT_SIDE)
    with pytest.raises(ValueError, match="worker='mxnet'"):
        driver.side_names("mxnet")
