"""The batch-halving schedule of loops whose rows end at different steps.

A loop over a batch whose rows end at different steps (greedy decoding,
`keras_attn.search.strategies`; a bidirectional RNN over sources of different lengths,
`keras_attn.recurrent.by_length`) runs in stages of fixed shapes, so that it
compiles under XLA and `jax.jit`: a stage runs while more than half its rows
are open, then the open rows, first, fill a batch half the size. Each stage
traces the loop's body once more (a larger graph, a longer compile), so the
stages stop at `HALVINGS`: a batch of up to `2 ** HALVINGS` rows ends in a
stage of one row, a larger one keeps its last stage's size.
"""

from keras import ops

# 64 rows go down to one: the batches a server runs.
HALVINGS = 6


def stage_limit(stage, rows):
    """`(limit, last)`: how many open rows stage `stage` of `rows` rows runs
    down to, and whether it is the last stage.

    The last stage runs until every row has ended (`limit` 0). It is stage
    `HALVINGS`, or a stage of one row when `rows` is a Python int (a known
    batch has no smaller stage to go to); the others run down to half their
    rows.
    """
    if stage >= HALVINGS or (isinstance(rows, int) and rows <= 1):
        return 0, True
    return rows // 2, False


def next_stage_rows(limit, rows):
    """The rows of the stage after one of `rows` rows run down to `limit`
    open rows: `limit`, at least 1 and at most `rows` (Python ints stay
    Python ints, so that shapes stay static)."""
    if isinstance(limit, int) and isinstance(rows, int):
        return min(max(limit, 1), rows)
    return ops.minimum(ops.maximum(limit, 1), rows)
