"""PyTorch's seq2seq tutorial model, ported into keras-attn, gives its numbers.

`benchmarks/peer_pytorch_tutorial.py` builds the tutorial's `EncoderRNN` and
`AttnDecoderRNN` and the same model in keras-attn (a Bahdanau-style
`AttentionCellWrapper` over a `GRUCell`), and ports the tutorial's weights
into it: the GRU gates reordered, `Wa`/`Ua`/`Va` as the score's kernels.
"""

import numpy as np
import pytest

pytestmark = pytest.mark.torch_only


def test_the_ported_model_gives_the_tutorials_log_probs_and_loss():
    import torch

    from benchmarks import peer_pytorch_tutorial as peer

    source, target = peer.reversal_pairs(4, vocab=12)
    (encoder, decoder, optimizers), model = peer.build_pair(vocab=12)
    source_t, target_t = torch.from_numpy(source), torch.from_numpy(target)
    expected = peer.tutorial_forward(encoder, decoder, source_t, target_t).numpy()
    inputs = [source, peer.decoder_inputs(target)]
    logits = np.asarray(model.predict_on_batch(inputs))
    assert logits.shape == (4, peer.MAX_LENGTH, 12)
    got = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(got, expected, atol=1e-5)
    # The same loss: the mean negative log-likelihood of the target tokens.
    picked = np.take_along_axis(expected, target[..., None], -1)
    loss = model.evaluate(inputs, target, verbose=0)
    np.testing.assert_allclose(loss, -picked.mean(), rtol=1e-5)
    assert loss > 2.0  # untrained: about log(12)


def test_the_tutorials_gru_gates_are_reordered():
    import torch

    from benchmarks import peer_pytorch_tutorial as peer

    gru = torch.nn.GRU(2, 1, batch_first=True)
    with torch.no_grad():
        # Rows r, z, n of torch's stacked weight: 1, 2, 3.
        gru.weight_ih_l0.copy_(torch.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]))
    kernel, _, bias = peer.gru_weights(gru)
    # Keras' columns z, r, h.
    assert kernel.tolist() == [[2.0, 1.0, 3.0], [2.0, 1.0, 3.0]]
    assert bias.shape == (2, 3)
