"""Several trained summarizers that decode as one.

A run with `--ensemble N` trains N members that differ only in their seed
(initial weights, data order). `SummarizerEnsemble` offers the decoding
interface of one `HeadlineSummarizer` (`initial_decoder_state`,
`output_kernel`, `step`), so that the search, the export and the tuning take
it as they take one model: at each step the members' next-token
distributions are averaged (in probability, over the same extended
vocabulary, since the members share the vocabulary and the source's copy
ids), and so are their attentions, which the readable output and the
heatmaps use.
"""

import math

import keras
from keras import ops


class SummarizerEnsemble(keras.Model):
    """The mean next-token distribution of `members`.

    Args:
        members: trained `HeadlineSummarizer`s with the same config (all but
            the seed) and vocabulary.
    """

    def __init__(self, members, **kwargs):
        super().__init__(**kwargs)
        if len(members) < 2:
            raise ValueError(
                "An ensemble needs at least two members. "
                f"Received: {len(members)} member(s)"
            )
        self.members = list(members)

    def initial_decoder_state(
        self, source_ids, source_ext_ids, shortlist=0, by_length=False
    ):
        states, memories = zip(
            *(
                m.initial_decoder_state(
                    source_ids, source_ext_ids, shortlist, by_length=by_length
                )
                for m in self.members
            ),
            strict=True,
        )
        return list(states), list(memories)

    def output_kernel(self, shortlist=0):
        return [m.output_kernel(shortlist) for m in self.members]

    def step(self, ids, state, memory, output_kernel=None):
        kernels = output_kernel or [None] * len(self.members)
        log_probs, states, attentions = zip(
            *(
                m.step(ids, s, mem, output_kernel=k)
                for m, s, mem, k in zip(
                    self.members, state, memory, kernels, strict=True
                )
            ),
            strict=True,
        )
        attention = ops.mean(ops.stack(attentions), axis=0)
        return self.combine(ops.stack(log_probs)), list(states), attention

    def combine(self, log_probs):
        """The members' `(members, N, V)` log-probabilities to the ensemble's.

        `log(mean(p))`, stable: logsumexp over the members minus `log N`.
        A subclass may override it to mix the members another way.
        """
        return ops.logsumexp(log_probs, axis=0) - math.log(len(self.members))
