"""Writes small own-data sets in the `org_data` layout, to train on as a user would.

Three sets of about 3,000 training pairs, each a document and its one-line
summary:

- `ru`, `ja`, `zh_CN`, `uk`: Debian's translated package descriptions
  (`dists/bookworm/main/i18n/Translation-<language>.bz2`): the long
  description is the document, the translated one-line description its
  summary. Packages of one family (`foo`, `foo-dev`, `libfoo1`, ...) share
  templated text, so a family goes to one split only, chosen by a hash of
  its name.
- `en`: the first pairs of the Gigaword sample's training split, with the
  sample's own validation and test splits (the control: the same text as the
  plain command's, at the size of the others).

    python -m benchmarks.own_data_sets --language ja --out /work/own/ja
    python train.py --data-dir /work/own/ja --ensemble 1

The Translation file is downloaded from `--mirror` unless `--translation`
names a local copy.
"""

import argparse
import bz2
import hashlib
import re
import shutil
import sys
import urllib.request
from pathlib import Path

import regex

from models.text.cjk import CJK_CHARACTERS

DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SUITE = "bookworm"
DEBIAN_LANGUAGES = ("ru", "uk", "ja", "zh_CN")
SPLITS = ("train", "dev", "test")

# Chinese and Japanese characters (`models.text.cjk`): a description's lines are
# wrapped at a width, and a wrap between two of them is no space.
_CJK = regex.compile(f"[{CJK_CHARACTERS}]")

# Suffixes and prefixes that make packages of one family: `libfoo-dev`,
# `python3-foo`, `foo-doc` are all `foo`.
_FAMILY_AFFIXES = re.compile(
    r"^(lib|python3?-|golang-|node-|ruby-|r-cran-|perl-)|"
    r"(-dev|-doc|-dbg|-common|-data|-utils|-tools|-bin|-perl|-java|[\d.]+)$"
)


def parse_translation(text):
    """`(package, summary, description)` for each stanza of a Translation file.

    A stanza's `Description-<language>:` line is the summary; the indented
    lines after it are the description, where a lone `.` separates
    paragraphs.
    """
    for stanza in text.split("\n\n"):
        package, summary, lines = None, None, []
        for line in stanza.splitlines():
            if line.startswith("Package:"):
                package = line.split(":", 1)[1].strip()
            elif line.startswith("Description-") and ":" in line:
                summary = line.split(":", 1)[1].strip()
            elif line.startswith(" ") and summary is not None:
                body = line.strip()
                lines.append("" if body == "." else body)
        description = " ".join(unwrap(lines).split())
        if package and summary and description:
            yield package, summary, description


def unwrap(lines):
    """The wrapped `lines` as one text: joined by a space, or by nothing
    where both sides of the wrap are Chinese or Japanese characters."""
    text = ""
    for line in lines:
        cjk_wrap = text and line and _CJK.match(text[-1]) and _CJK.match(line[0])
        text += line if cjk_wrap or not text else " " + line
    return text


def family(package):
    """The family a package belongs to, its affixes stripped."""
    name, previous = package, None
    while name != previous and len(name) > 2:
        previous, name = name, _FAMILY_AFFIXES.sub("", name)
    return name or package


def split_of(package, dev_share, test_share):
    """`train`, `dev` or `test`, from a hash of the package's family."""
    digest = hashlib.sha256(family(package).encode("utf-8")).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64
    if point < test_share:
        return "test"
    if point < test_share + dev_share:
        return "dev"
    return "train"


def debian_pairs(text, *, train_pairs, eval_pairs):
    """`{split: [(document, summary), ...]}` from a Translation file's text.

    Documents seen before (templated descriptions) are dropped; each split
    keeps its first pairs in the file's (alphabetical) order, up to
    `train_pairs` for `train` and `eval_pairs` for `dev` and `test`.
    """
    limits = {"train": train_pairs, "dev": eval_pairs, "test": eval_pairs}
    share = eval_pairs / (train_pairs + 2 * eval_pairs)
    out, seen = {s: [] for s in SPLITS}, set()
    for package, summary, description in parse_translation(text):
        if description in seen:
            continue
        seen.add(description)
        split = split_of(package, share, share)
        if len(out[split]) < limits[split]:
            out[split].append((description, summary))
    return out


def write_org_data(pairs, out_dir):
    """Writes `{split}.src.txt` and `{split}.tgt.txt` under `out_dir/org_data`."""
    org = Path(out_dir) / "org_data"
    org.mkdir(parents=True, exist_ok=True)
    for split, rows in pairs.items():
        for suffix, column in (("src", 0), ("tgt", 1)):
            lines = (" ".join(row[column].split()) + "\n" for row in rows)
            (org / f"{split}.{suffix}.txt").write_text("".join(lines), "utf-8")
    return org


def read_translation(language, translation=None, mirror=DEBIAN_MIRROR):
    """The text of Debian's Translation file for `language`."""
    if translation is not None:
        raw = Path(translation).read_bytes()
    else:
        url = f"{mirror}/dists/{DEBIAN_SUITE}/main/i18n/Translation-{language}.bz2"
        print(f"Downloading {url}", file=sys.stderr)
        with urllib.request.urlopen(url, timeout=120) as response:
            raw = response.read()
    return bz2.decompress(raw).decode("utf-8")


def gigaword_control(sample_dir, out_dir, train_pairs):
    """The sample's first `train_pairs` training pairs, its dev and test whole."""
    source = Path(sample_dir)
    source = source / "org_data" if (source / "org_data").is_dir() else source
    org = Path(out_dir) / "org_data"
    org.mkdir(parents=True, exist_ok=True)
    for suffix in ("src", "tgt"):
        with open(source / f"train.{suffix}.txt", encoding="utf-8") as lines:
            head = [line for _, line in zip(range(train_pairs), lines, strict=False)]
        (org / f"train.{suffix}.txt").write_text("".join(head), "utf-8")
        for split in ("dev", "test"):
            name = f"{split}.{suffix}.txt"
            shutil.copyfile(source / name, org / name)
    return org


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--language", required=True, choices=(*DEBIAN_LANGUAGES, "en"))
    parser.add_argument("--out", required=True, help="The set's folder.")
    parser.add_argument("--train-pairs", type=int, default=3000)
    parser.add_argument(
        "--eval-pairs", type=int, default=300, help="Pairs of dev and of test."
    )
    parser.add_argument("--translation", help="A local Translation-<language>.bz2.")
    parser.add_argument("--mirror", default=DEBIAN_MIRROR)
    parser.add_argument(
        "--gigaword-sample",
        default="../shared/data/gigaword_sample",
        help="The Gigaword sample (`en` only).",
    )
    args = parser.parse_args(argv)
    if args.language == "en":
        org = gigaword_control(args.gigaword_sample, args.out, args.train_pairs)
    else:
        text = read_translation(args.language, args.translation, args.mirror)
        pairs = debian_pairs(
            text, train_pairs=args.train_pairs, eval_pairs=args.eval_pairs
        )
        org = write_org_data(pairs, args.out)
    for split in SPLITS:
        with open(org / f"{split}.src.txt", encoding="utf-8") as lines:
            count = sum(1 for _ in lines)
        print(f"{org / split}: {count} pairs")


if __name__ == "__main__":
    main()
