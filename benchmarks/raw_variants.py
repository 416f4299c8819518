"""Raw-looking variants of Gigaword test sources, for the readable headlines.

The test sources are lowercased, their digits masked as `#` and their
brackets and quotes escaped, so a headline written back from them never
exercises case, digits or typographic punctuation. This writes, one per
line, the first `--count` test sources with a random share of their words
capitalized or upper-cased, each `#` a random digit, `-lrb-`/`-rrb-` as
brackets, ``` `` ```/`''` as typographic quotes and punctuation joined;
then the readable tests' hand-written texts (accents, CJK, emoji, quotes).
Seeded, so the same file each time. Then, for example:

    python -m benchmarks.raw_variants --data-dir ../shared/data/gigaword_sample \\
        --out /tmp/raw_docs.txt
    python -m benchmarks.compare_exports saved_models/a/1 saved_models/b/1 \\
        /tmp/raw_docs.txt --readable
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

_ESCAPES = {"-lrb-": "(", "-rrb-": ")", "``": "\u201c", "''": "\u201d"}
_JOINED = ((" 's", "'s"), (" ,", ","), (" .", "."), ("( ", "("), (" )", ")"))


def raw_variant(line, rng):
    words = []
    for word in line.split():
        word = _ESCAPES.get(word, word)
        word = re.sub("#", lambda _: str(rng.randint(0, 9)), word)
        draw = rng.random()
        if draw < 0.3:
            word = word[:1].upper() + word[1:]
        elif draw < 0.35:
            word = word.upper()
        words.append(word)
    text = " ".join(words)
    for spaced, joined in _JOINED:
        text = text.replace(spaced, joined)
    return text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", required=True, help="folder holding org_data/")
    p.add_argument("--out", required=True, help="file to write")
    p.add_argument("--count", type=int, default=500)
    args = p.parse_args(argv)
    from tests.test_readable import CORPUS

    path = Path(args.data_dir) / "org_data" / "test.src.txt"
    lines = path.read_text(encoding="utf-8").splitlines()[: args.count]
    rng = random.Random(0)
    texts = [raw_variant(line, rng) for line in lines] + [c for c in CORPUS if c]
    Path(args.out).write_text(
        "".join(t.replace("\n", " ") + "\n" for t in texts), encoding="utf-8"
    )
    print(f"{len(texts)} documents written to {args.out}")


if __name__ == "__main__":
    main()
