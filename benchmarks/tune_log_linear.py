"""`tune_grid.py` with the ensemble's members combined log-linearly.

`SummarizerEnsemble.step` averages the members' probabilities (`log mean
p`). This runs the same grid with the mean of their log-probabilities
instead (a geometric mean, as Marian and OpenNMT's `--ensemble` log-linear
variants do), renormalised over the extended vocabulary unless
`--no-renormalize`: to compare the two on the same validation pairs.

    python benchmarks/tune_log_linear.py --run-dir runs/headlines \\
        --data-dir ../shared/data/gigaword_sample \\
        --length-penalties 2.0 2.5 3.0 3.5 --ngram-sizes 1
"""

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def log_linear(renormalize):
    """`SummarizerEnsemble.combine`: the mean of the members' log-probs."""
    from keras import ops

    def combine(self, log_probs):
        mean = ops.mean(log_probs, axis=0)
        if renormalize:
            mean = mean - ops.logsumexp(mean, axis=-1, keepdims=True)
        return mean

    return combine


def main():
    renormalize = "--no-renormalize" not in sys.argv
    if not renormalize:
        sys.argv.remove("--no-renormalize")
    import tune_grid

    from models.ensemble import SummarizerEnsemble

    SummarizerEnsemble.combine = log_linear(renormalize)
    tune_grid.main()


if __name__ == "__main__":
    main()
