"""The tutorial's model as a PyTorch user who wants speed writes it.

The same function as PyTorch's seq2seq tutorial (`peer_pytorch_tutorial`:
an `nn.GRU` encoder, a GRU decoder with Bahdanau attention, dropout 0.1 on
the embeddings), its weights taken from the tutorial's modules
(`FastSeq2Seq.from_tutorial`), written for speed:

* the memory's key projection (`Ua keys + Wa.bias + Ua.bias`) once a batch,
  not once a step;
* the decoder's input-side GRU gates of the embedded targets, and the
  output layer and log-softmax, one matrix product over all steps when
  teacher forcing;
* one matrix product of the hidden state a step for both the attention's
  query and the GRU's hidden-side gates (`Wa` and `W_hh` stacked);
* `Va.bias`, which the softmax cancels, left out; one fused Adam;
* `torch.compile` of the training step's forward pass and of the whole
  greedy decoding, where `compiled=True`.
"""

import torch
from torch import nn
from torch.nn import functional as F

from benchmarks.tutorial_task import MAX_LENGTH, SOS


class FastSeq2Seq(nn.Module):
    def __init__(self, vocab, hidden, dropout_p=0.1):
        super().__init__()
        self.hidden = hidden
        self.dropout_p = dropout_p
        self.source_embedding = nn.Embedding(vocab, hidden)
        self.encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.target_embedding = nn.Embedding(vocab, hidden)
        self.key_proj = nn.Linear(hidden, hidden)  # Ua, its bias + Wa's
        # Rows: the attention's query (Wa), then the GRU's W_hh (r, z, n).
        self.hidden_proj = nn.Linear(hidden, 4 * hidden)
        self.score = nn.Parameter(torch.empty(hidden))  # Va
        self.gates_embedded = nn.Linear(hidden, 3 * hidden)  # W_ih[:, :H], b_ih
        self.gates_context = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, vocab)

    @classmethod
    def from_tutorial(cls, encoder, decoder):
        """A `FastSeq2Seq` of the tutorial's `EncoderRNN` / `AttnDecoderRNN`
        weights."""
        vocab, hidden = decoder.out.out_features, decoder.out.in_features
        model = cls(vocab, hidden, encoder.dropout.p)
        attention, gru = decoder.attention, decoder.gru
        with torch.no_grad():
            model.source_embedding.load_state_dict(encoder.embedding.state_dict())
            model.encoder.load_state_dict(encoder.gru.state_dict())
            model.target_embedding.load_state_dict(decoder.embedding.state_dict())
            model.key_proj.weight.copy_(attention.Ua.weight)
            model.key_proj.bias.copy_(attention.Ua.bias + attention.Wa.bias)
            model.hidden_proj.weight.copy_(
                torch.cat([attention.Wa.weight, gru.weight_hh_l0])
            )
            zeros = torch.zeros(hidden)
            model.hidden_proj.bias.copy_(torch.cat([zeros, gru.bias_hh_l0]))
            model.score.copy_(attention.Va.weight[0])
            model.gates_embedded.weight.copy_(gru.weight_ih_l0[:, :hidden])
            model.gates_embedded.bias.copy_(gru.bias_ih_l0)
            model.gates_context.weight.copy_(gru.weight_ih_l0[:, hidden:])
            model.out.load_state_dict(decoder.out.state_dict())
        return model

    def encode(self, source):
        embedded = F.dropout(
            self.source_embedding(source), self.dropout_p, self.training
        )
        memory, state = self.encoder(embedded)
        return memory, self.key_proj(memory), state[0]

    def step(self, gates_in, hidden, memory, keys):
        """One decoder step: `gates_in`, the embedded input's GRU gates."""
        projected = self.hidden_proj(hidden)
        query, gates_h = projected.split([self.hidden, 3 * self.hidden], -1)
        scores = torch.tanh(keys + query[:, None]) @ self.score
        weights = torch.softmax(scores, -1)
        context = torch.bmm(weights[:, None], memory)[:, 0]
        gates_in = gates_in + self.gates_context(context)
        i_r, i_z, i_n = gates_in.chunk(3, -1)
        h_r, h_z, h_n = gates_h.chunk(3, -1)
        reset = torch.sigmoid(i_r + h_r)
        update = torch.sigmoid(i_z + h_z)
        new = torch.tanh(i_n + reset * h_n)
        return new + update * (hidden - new)

    def forward(self, source, decoder_inputs):
        """Teacher-forced log-probabilities `(batch, steps, vocab)`."""
        memory, keys, hidden = self.encode(source)
        embedded = self.target_embedding(decoder_inputs)
        embedded = F.dropout(embedded, self.dropout_p, self.training)
        gates_in = self.gates_embedded(embedded)
        hiddens = []
        for t in range(decoder_inputs.shape[1]):
            hidden = self.step(gates_in[:, t], hidden, memory, keys)
            hiddens.append(hidden)
        return F.log_softmax(self.out(torch.stack(hiddens, 1)), -1)

    def loss(self, source, decoder_inputs, target):
        log_probs = self(source, decoder_inputs)
        return F.nll_loss(log_probs.flatten(0, 1), target.flatten())

    def greedy(self, source, max_length=MAX_LENGTH):
        """Greedy ids `(batch, max_length)`, every row to `max_length`."""
        memory, keys, hidden = self.encode(source)
        ids = torch.full((source.shape[0],), SOS, dtype=torch.long)
        found = []
        for _ in range(max_length):
            gates_in = self.gates_embedded(self.target_embedding(ids))
            hidden = self.step(gates_in, hidden, memory, keys)
            ids = self.out(hidden).argmax(-1)
            found.append(ids)
        return torch.stack(found, 1)


def fast_programs(model, source, decoder_inputs, target, compiled=False):
    """`(train_step, decode)`: zero-argument callables of `model`'s training
    step (forward, backward, fused Adam) and greedy decoding of `source`."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    loss = torch.compile(model.loss) if compiled else model.loss
    greedy = torch.compile(model.greedy) if compiled else model.greedy

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        value = loss(source, decoder_inputs, target)
        value.backward()
        optimizer.step()
        return value.item()

    def decode():
        model.eval()
        try:
            with torch.inference_mode():
                return greedy(source)
        finally:
            model.train()

    return train_step, decode


def tutorial_greedy(encoder, decoder, source, max_length=MAX_LENGTH):
    """The tutorial's greedy decoding (`AttnDecoderRNN.forward` without a
    target: `topk(1)` of each step's output fed back), in evaluation mode."""
    encoder.eval(), decoder.eval()
    try:
        with torch.no_grad():
            memory, hidden = encoder(source)
            ids = torch.full((source.shape[0], 1), SOS, dtype=torch.long)
            found = []
            for _ in range(max_length):
                output, hidden, _ = decoder.forward_step(ids, hidden, memory)
                _, top = output.topk(1)
                ids = top.squeeze(-1).detach()
                found.append(ids)
            return torch.cat(found, 1)
    finally:
        encoder.train(), decoder.train()
