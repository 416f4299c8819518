"""PyTorch's seq2seq tutorial model against the same model in keras-attn, on torch.

The peer: PyTorch's tutorial "Translation with a Sequence to Sequence
Network and Attention" (`EncoderRNN`, `BahdanauAttention`, `AttnDecoderRNN`,
as the tutorial writes them: GRUs, hidden 128, dropout 0.1, teacher
forcing, `NLLLoss` over log-softmaxed outputs, one Adam per module). Ours:
the same model on Keras' torch backend, `AttentionCellWrapper(GRUCell(128),
BahdanauAttention(128), style="bahdanau")` in an `AttentionRNN`, compiled
with Adam and trained with `train_on_batch`. The tutorial's weights are
ported into ours (`port_tutorial_weights`), so both start from the same
numbers and compute the same function.

Data: a synthetic task of the tutorial's size, every pair of the same length
(no padding, which the tutorial does not mask): a source of
`MAX_LENGTH - 1` random tokens and its end token, the target the source
reversed, then the end token.

Timed, in one process, interleaved (A, B, A, B, ...) at each of
`--threads` (`torch.set_num_threads`): one training step (forward, backward,
Adam) and one forward pass (teacher-forced, without gradients:
`torch.no_grad()` and `predict_on_batch`) of a batch of 32. Reported:
milliseconds per call (medians over rounds) and the median per-round ratio
keras-attn / PyTorch. `--profile` also prints torch.profiler's table of
keras-attn's forward pass, and for each program the share of its self time
(cProfile) by where it is spent: keras_attn, Keras, Keras' torch backend,
torch's pytree (which `keras.tree` runs on), torch's other Python, torch's
kernels (its builtins).

    KERAS_BACKEND=torch python -m benchmarks.peer_pytorch_tutorial
"""

import argparse
import json
import os

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from benchmarks.common import (  # noqa: E402
    interleaved,
    median,
    median_ratio,
    print_machine_info,
)
from benchmarks.tutorial_task import (  # noqa: E402, F401 (the tests' names)
    BATCH,
    EOS,
    HIDDEN,
    MAX_LENGTH,
    SOS,
    decoder_inputs,
    keras_attn_model,
    reversal_pairs,
)

# ------------------------------------------------------- the tutorial's model


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size, dropout_p=0.1):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input):
        embedded = self.dropout(self.embedding(input))
        output, hidden = self.gru(embedded)
        return output, hidden


class BahdanauAttention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.Wa = nn.Linear(hidden_size, hidden_size)
        self.Ua = nn.Linear(hidden_size, hidden_size)
        self.Va = nn.Linear(hidden_size, 1)

    def forward(self, query, keys):
        scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
        scores = scores.squeeze(2).unsqueeze(1)
        weights = F.softmax(scores, dim=-1)
        context = torch.bmm(weights, keys)
        return context, weights


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attention = BahdanauAttention(hidden_size)
        self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, encoder_outputs, encoder_hidden, target_tensor):
        batch_size = encoder_outputs.size(0)
        decoder_input = torch.full((batch_size, 1), SOS, dtype=torch.long)
        decoder_hidden = encoder_hidden
        decoder_outputs = []
        for i in range(MAX_LENGTH):
            decoder_output, decoder_hidden, _ = self.forward_step(
                decoder_input, decoder_hidden, encoder_outputs
            )
            decoder_outputs.append(decoder_output)
            decoder_input = target_tensor[:, i].unsqueeze(1)  # teacher forcing
        decoder_outputs = torch.cat(decoder_outputs, dim=1)
        return F.log_softmax(decoder_outputs, dim=-1), decoder_hidden

    def forward_step(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input))
        query = hidden.permute(1, 0, 2)
        context, attn_weights = self.attention(query, encoder_outputs)
        input_gru = torch.cat((embedded, context), dim=2)
        output, hidden = self.gru(input_gru, hidden)
        return self.out(output), hidden, attn_weights


def tutorial_train_step(encoder, decoder, optimizers, source, target):
    """The tutorial's `train_epoch` body, for one batch."""
    for optimizer in optimizers:
        optimizer.zero_grad()
    encoder_outputs, encoder_hidden = encoder(source)
    log_probs, _ = decoder(encoder_outputs, encoder_hidden, target)
    loss = F.nll_loss(log_probs.view(-1, log_probs.size(-1)), target.view(-1))
    loss.backward()
    for optimizer in optimizers:
        optimizer.step()
    return loss.item()


def tutorial_forward(encoder, decoder, source, target):
    """Teacher-forced log-probabilities, in evaluation mode (no dropout, as
    Keras' `predict_on_batch`), without gradients."""
    encoder.eval(), decoder.eval()
    try:
        with torch.no_grad():
            encoder_outputs, encoder_hidden = encoder(source)
            return decoder(encoder_outputs, encoder_hidden, target)[0]
    finally:
        encoder.train(), decoder.train()


# ------------------------------------------------------- keras-attn's model


def _torch_gates_to_keras(weight):
    """torch's stacked (r, z, n) rows -> Keras' (z, r, h) columns."""
    r, z, n = np.split(weight, 3, axis=0)
    return np.concatenate([z, r, n], axis=0).T


def gru_weights(gru):
    p = {k: v.detach().numpy() for k, v in gru.named_parameters()}
    bias = np.stack(
        [
            _torch_gates_to_keras(p["bias_ih_l0"][:, None])[0],
            _torch_gates_to_keras(p["bias_hh_l0"][:, None])[0],
        ]
    )
    return [
        _torch_gates_to_keras(p["weight_ih_l0"]),
        _torch_gates_to_keras(p["weight_hh_l0"]),
        bias,
    ]


def port_tutorial_weights(encoder, decoder, model):
    """Sets `model` (`keras_attn_model`) to the tutorial modules' weights."""

    def numpy(t):
        return t.detach().numpy()

    model.get_layer("source_embedding").set_weights([numpy(encoder.embedding.weight)])
    model.get_layer("encoder").cell.set_weights(gru_weights(encoder.gru))
    model.get_layer("target_embedding").set_weights([numpy(decoder.embedding.weight)])
    cell = model.get_layer("decoder").cell
    cell.cell.set_weights(gru_weights(decoder.gru))
    attention = decoder.attention
    cell.attention.set_weights(
        [
            numpy(attention.Ua.weight).T,  # key_kernel
            numpy(attention.Wa.weight).T,  # query_kernel
            numpy(attention.Va.weight)[0],  # score_vector; Va.bias cancels
            numpy(attention.Wa.bias) + numpy(attention.Ua.bias),  # bias
        ]
    )
    model.get_layer("output").set_weights(
        [numpy(decoder.out.weight).T, numpy(decoder.out.bias)]
    )


# ------------------------------------------------------------------- main


def build_pair(vocab, seed=0):
    """The tutorial's modules and optimizers, and keras-attn's compiled model,
    with the same initial weights."""
    torch.manual_seed(seed)
    encoder, decoder = EncoderRNN(vocab, HIDDEN), AttnDecoderRNN(HIDDEN, vocab)
    optimizers = [torch.optim.Adam(m.parameters(), lr=1e-3) for m in (encoder, decoder)]
    model = keras_attn_model(vocab)
    port_tutorial_weights(encoder, decoder, model)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return (encoder, decoder, optimizers), model


def programs(tutorial, model, source, target):
    """`{name: callable}`: each side's training step and forward pass."""
    encoder, decoder, optimizers = tutorial
    inputs = [source, decoder_inputs(target)]
    source_t, target_t = torch.from_numpy(source), torch.from_numpy(target)
    return {
        "pytorch train": lambda: tutorial_train_step(
            encoder, decoder, optimizers, source_t, target_t
        ),
        "keras-attn train": lambda: model.train_on_batch(inputs, target),
        "pytorch forward": lambda: tutorial_forward(
            encoder, decoder, source_t, target_t
        ),
        "keras-attn forward": lambda: model.predict_on_batch(inputs),
    }


def profile_forward(model, inputs, rows=25):
    """torch.profiler's table of keras-attn's forward pass, by self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    model.predict_on_batch(inputs)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(10):
            model.predict_on_batch(inputs)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def _origin(code):
    """Where a cProfile entry's own time goes: the package of its file."""
    filename = code[0]
    if filename == "~":  # a builtin: `torch.matmul`, a tensor's method
        return "torch kernels" if "torch" in code[2] else "builtins"
    for part, name in (
        ("/keras_attn/", "keras_attn"),
        ("/keras/src/backend/torch/", "Keras' torch backend"),
        ("/torch/utils/_pytree.py", "torch's pytree (keras.tree on torch)"),
        ("/benchmarks/", "the tutorial's modules"),
        ("/keras/src/", "Keras (layers, ops, tree, trainer)"),
        ("/torch/", "torch's Python"),
    ):
        if part in filename:
            return name
    return "other"


def self_time_by_package(fn, calls=20):
    """`{package: share}` of the self time of `calls` calls of `fn` (cProfile)."""
    import cProfile
    import pstats

    fn()
    profiler = cProfile.Profile()
    profiler.runcall(lambda: [fn() for _ in range(calls)])
    totals = {}
    for code, (_, _, self_time, _, _) in pstats.Stats(profiler).stats.items():
        totals[_origin(code)] = totals.get(_origin(code), 0.0) + self_time
    whole = sum(totals.values())
    return {k: round(v / whole, 3) for k, v in sorted(totals.items())}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vocab", type=int, default=30)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--number", type=int, default=10)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args(argv)
    if keras.backend.backend() != "torch":
        raise SystemExit("Run on the torch backend: KERAS_BACKEND=torch.")
    print_machine_info()
    source, target = reversal_pairs(BATCH, args.vocab)
    tutorial, model = build_pair(args.vocab)
    for module in tutorial[:2]:
        module.train()
    results = {}
    for threads in args.threads:
        torch.set_num_threads(threads)
        times = interleaved(
            programs(tutorial, model, source, target),
            repeats=args.repeats,
            number=args.number,
        )
        for kind in ("train", "forward"):
            results[f"{kind} ms, {threads} thread(s)"] = {
                "pytorch": round(1e3 * median(times[f"pytorch {kind}"]), 2),
                "keras-attn": round(1e3 * median(times[f"keras-attn {kind}"]), 2),
                "ratio": round(
                    median_ratio(times, f"keras-attn {kind}", f"pytorch {kind}"), 3
                ),
            }
        print(json.dumps({"threads": threads, **results}))
    if args.profile:
        torch.set_num_threads(args.threads[0])
        profile_forward(model, [source, decoder_inputs(target)])
        for name, fn in programs(tutorial, model, source, target).items():
            print(json.dumps({f"self time, {name}": self_time_by_package(fn)}))
    print(json.dumps({"vocab": args.vocab, "batch": BATCH, **results}))


if __name__ == "__main__":
    main()
