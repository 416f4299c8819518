"""A synthetic headline data set whose headlines carry the source's numbers.

    python -m benchmarks.digits_dataset --out /tmp/digits_data

writes `org_data/{train,dev,test}.{src,tgt}.txt` (one pair per line, the
layout `train.py --data-dir` reads) of made-up news sentences with job cuts,
software versions, prices, percentages and years, whose reference headlines
repeat those figures and the names' capitals. Gigaword's own text masks
every digit as `#`, so it cannot show what masking costs; this can
(BENCHMARKS.md, "Normalization"), at the size it was measured with:

    python train.py --dataset digits --data-dir /tmp/digits_data \
        --normalization {gigaword|general} --vocab-size 2000 \
        --embedding-dim 64 --hidden-size 128 --attention-units 64 \
        --batch-size 32 --max-source-length 40 --max-target-length 16 \
        --validate-every 1600 --train-examples 9600 \
        --validation-rouge-examples 50 --no-tune-decoding \
        --max-eval-examples 500 --seed 0
    python -m models.evaluation --model-dir <export> --dataset digits \
        --data-dir /tmp/digits_data --max-examples 500 --n-heatmaps 0 --readable
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

COMPANIES = [
    "Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark",
    "Wayne", "Tyrell", "Cyberdyne", "Soylent", "Wonka", "Gringotts", "Oscorp",
]  # fmt: skip
PRODUCTS = ["Python", "Linux", "Firefox", "Postgres", "Kubernetes", "Rust", "Java"]
CITIES = ["Paris", "Lagos", "Osaka", "Lima", "Oslo", "Denver", "Pune", "Hanoi"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
MONTHS = ["January", "March", "May", "July", "September", "November"]
UNITS = ["chip", "phone", "cloud", "retail", "banking", "games"]


def _pair(rng: random.Random) -> tuple[str, str]:
    company, day = rng.choice(COMPANIES), rng.choice(DAYS)
    kind = rng.randrange(5)
    if kind == 0:
        jobs = f"{rng.randrange(2, 60) * 100:,}"
        unit = rng.choice(UNITS)
        return (
            f"{company} Corp. said on {day} it would cut {jobs} jobs in its "
            f"{unit} division as demand slowed.",
            f"{company} to cut {jobs} jobs",
        )
    if kind == 1:
        product = rng.choice(PRODUCTS)
        version = f"{rng.randrange(1, 20)}.{rng.randrange(0, 13)}"
        year = rng.randrange(1995, 2031)
        return (
            f"The {product} project released version {version} in "
            f"{rng.choice(MONTHS)} {year}, its developers said on {day}.",
            f"{product} {version} released",
        )
    if kind == 2:
        pct = rng.randrange(2, 40)
        price = f"{rng.randrange(5, 900)}.{rng.randrange(10, 100)}"
        return (
            f"Shares of {company} rose {pct}% to ${price} on {day} after the "
            f"company raised its forecast.",
            f"{company} shares rise {pct}% to ${price}",
        )
    if kind == 3:
        city, year = rng.choice(CITIES), rng.randrange(2000, 2031)
        amount = f"{rng.randrange(1, 99)}.{rng.randrange(1, 10)}"
        return (
            f"The {city} city council on {day} approved a ${amount} million "
            f"budget for {year}, officials said.",
            f"{city} approves ${amount} million budget for {year}",
        )
    year, games = rng.randrange(1950, 2031), rng.randrange(2, 90)
    return (
        f"{company} founder, born in {year}, will step down after {games} "
        f"years, the company said on {day}.",
        f"{company} founder to step down after {games} years",
    )


def write(out: Path, sizes=(6000, 300, 500), seed=0) -> None:
    rng = random.Random(seed)
    folder = out / "org_data"
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in zip(("train", "dev", "test"), sizes, strict=True):
        pairs = [_pair(rng) for _ in range(n)]
        for i, name in enumerate(("src", "tgt")):
            text = "".join(p[i] + "\n" for p in pairs)
            (folder / f"{split}.{name}.txt").write_text(text, encoding="utf-8")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--sizes", type=int, nargs=3, default=(6000, 300, 500))
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    write(args.out, tuple(args.sizes), args.seed)
    print(f"Wrote {args.out / 'org_data'}")


if __name__ == "__main__":
    main()
