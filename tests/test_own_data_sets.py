"""The own-data builder: Debian's translated descriptions to org_data pairs."""

import pytest

# A summarizer tool: it reads Chinese and Japanese with `regex` (the
# summarizer's extra), which the library alone does not install.
pytestmark = pytest.mark.tf_only

import bz2  # noqa: E402

from benchmarks import own_data_sets  # noqa: E402

_TRANSLATION = """Package: 0ad
Description-md5: d943033bedada21853d2ae54a2578a7b
Description-ja: 古代戦争のリアルタイム戦略ゲーム
 0 A.D. は自由でオープンソースの、古代戦争の
 リアルタイム戦略ゲームです。
 .
 500 B.C. から 500 A.D. の期間。

Package: libfoo-dev
Description-md5: 00
Description-ja: foo の開発ファイル
 foo ライブラリの開発用ファイル。

Package: libfoo1
Description-md5: 01
Description-ja: foo ライブラリ
 foo ライブラリの開発用ファイル。

Package: empty
Description-md5: 02
Description-ja: 説明なし
"""


def test_stanzas_become_pairs_with_cjk_wraps_joined():
    rows = list(own_data_sets.parse_translation(_TRANSLATION))
    assert [r[0] for r in rows] == ["0ad", "libfoo-dev", "libfoo1"]
    package, summary, description = rows[0]
    assert summary == "古代戦争のリアルタイム戦略ゲーム"
    # The wrap between two Japanese characters is no space; the paragraph
    # mark `.` and a wrap after Latin text are one.
    assert description == (
        "0 A.D. は自由でオープンソースの、古代戦争のリアルタイム戦略ゲームです。"
        " 500 B.C. から 500 A.D. の期間。"
    )


def test_a_family_goes_to_one_split():
    assert own_data_sets.family("libfoo-dev") == "foo"
    assert own_data_sets.family("libfoo1") == "foo"
    assert own_data_sets.family("python3-foo") == "foo"
    for share in (0.1, 0.3):
        splits = {
            own_data_sets.split_of(p, share, share)
            for p in ("libfoo-dev", "libfoo1", "python3-foo", "foo-doc")
        }
        assert len(splits) == 1


def test_sets_are_written_without_repeated_documents(tmp_path):
    pairs = own_data_sets.debian_pairs(_TRANSLATION, train_pairs=10, eval_pairs=10)
    everything = [row for rows in pairs.values() for row in rows]
    assert len(everything) == 2  # libfoo1 repeats libfoo-dev's description
    path = tmp_path / "Translation-ja.bz2"
    path.write_bytes(bz2.compress(_TRANSLATION.encode("utf-8")))
    own_data_sets.main(
        ["--language", "ja", "--translation", str(path), "--out", str(tmp_path)]
    )
    org = tmp_path / "org_data"
    written = {
        split: (org / f"{split}.src.txt").read_text("utf-8").splitlines()
        for split in own_data_sets.SPLITS
    }
    assert sum(len(lines) for lines in written.values()) == 2
    for split, lines in written.items():
        targets = (org / f"{split}.tgt.txt").read_text("utf-8").splitlines()
        assert len(targets) == len(lines)
