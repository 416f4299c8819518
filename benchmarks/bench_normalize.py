"""Normalization's cost is bounded: a 120,000-character document costs about
what its first `max_chars` (4,096) characters cost.

Moved here from tests/test_text.py, where a wall-clock limit flaked on a
loaded machine; the test keeps the bounded-work check (the long document
normalizes exactly as its first 4,096 characters do).

    python benchmarks/bench_normalize.py
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tensorflow as tf  # noqa: E402
from common import interleaved, median_ratio, print_machine_info  # noqa: E402

from models import text  # noqa: E402


def main():
    print_machine_info()
    long_docs = tf.constant(["Word, " * 20_000] * 4)  # 120,000 characters each
    short_docs = tf.constant(["Word, " * 683] * 4)  # 4,098 characters each
    times = interleaved(
        {
            "long": lambda: text.normalize(long_docs).numpy(),
            "short": lambda: text.normalize(short_docs).numpy(),
        },
        repeats=7,
        number=5,
    )
    ratio = median_ratio(times, "long", "short")
    print(f"120,000 vs 4,098 characters: {ratio:.2f}x the time (median of 7)")


if __name__ == "__main__":
    main()
