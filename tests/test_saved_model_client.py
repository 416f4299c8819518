"""`models.decoding.saved_model_client` against the fake export of `fake_servable.py`.

The fake's headline is a document's first three words (upper-cased in
version 1, lower-cased in version 2), its score minus the number of source
words, and its headline word `t` attends to source word `t`: every answer is
known.
"""

import pytest

pytestmark = pytest.mark.tf_only

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from fake_servable import save_fake  # noqa: E402

from models.decoding import saved_model_client as client  # noqa: E402
from models.settings.errors import UserError  # noqa: E402

DOCS = [
    "Alpha Beta Gamma delta epsilon",
    "one two",
    "Red green blue cyan magenta yellow",
    "a b c d",
    "solo",
]
SIGNATURES = ["attention", "greedy", "length_control", "serving_default"]


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    """`headlines/` with versions 1 (upper case) and 2 (lower case)."""
    root = tmp_path_factory.mktemp("saved_models") / "headlines"
    root.mkdir()
    save_fake(root / "1", upper=True)
    save_fake(root / "2", upper=False)
    return root


def _first_three(document, change):
    return " ".join(change(w) for w in document.split()[:3])


def test_decode_in_batches_calls_in_order_at_most_batch_size():
    batches = []

    def decode(batch):
        batches.append(list(batch))
        return [d.upper() for d in batch]

    out = client.decode_in_batches(decode, DOCS, batch_size=2)
    assert batches == [DOCS[:2], DOCS[2:4], DOCS[4:]]
    assert out == [d.upper() for d in DOCS]
    with pytest.raises(UserError, match="Received: batch_size=0"):
        client.decode_in_batches(decode, DOCS, batch_size=0)


def test_folder_resolves_to_its_newest_version(export_dir):
    newest = client.decode_documents(
        export_dir, DOCS, output="headlines", batch_size=2, progress=False
    )
    assert newest == [_first_three(d, str.lower) for d in DOCS]
    first = client.decode_documents(
        export_dir / "1", DOCS, output="headlines", batch_size=3, progress=False
    )
    assert first == [_first_three(d, str.upper) for d in DOCS]


def test_signature_names_of_a_folder_and_of_a_loaded_model(export_dir):
    assert client.signature_names(export_dir) == SIGNATURES
    loaded = client.load_saved_model(export_dir / "1")
    assert client.signature_names(loaded) == SIGNATURES
    assert client.load_saved_model(loaded) is loaded
    assert set(client.signature_defs(export_dir / "2")) == set(SIGNATURES)


def test_decode_outputs_scores_and_attention(export_dir):
    loaded = client.load_saved_model(export_dir / "1")
    records = client.decode_outputs(
        loaded, DOCS, outputs=("headlines", "scores"), batch_size=2, progress=False
    )
    assert [r["headlines"] for r in records] == [
        _first_three(d, str.upper) for d in DOCS
    ]
    assert [float(r["scores"]) for r in records] == [-len(d.split()) for d in DOCS]

    examples = client.decode_outputs(
        loaded,
        DOCS[:2],
        signature="attention",
        outputs=("attention", "source_words", "headline_words"),
        batch_size=2,
        progress=False,
    )
    # Padded to the batch's longest: 5 source words, 3 headline words.
    first, second = examples
    assert first["source_words"] == [w.upper() for w in DOCS[0].split()]
    assert first["headline_words"] == ["alpha", "beta", "gamma"]
    np.testing.assert_array_equal(first["attention"], np.eye(3, 5))
    assert second["source_words"] == ["ONE", "TWO", "", "", ""]
    assert second["headline_words"] == ["one", "two", ""]
    np.testing.assert_array_equal(second["attention"], np.eye(3, 5) * [[1], [1], [0]])


def test_progress_bar_counts_the_documents(export_dir, capsys):
    out = client.decode_documents(
        export_dir, DOCS, output="headlines", batch_size=2, progress=True
    )
    assert len(out) == len(DOCS)
    bar = capsys.readouterr().err
    assert "serving_default" in bar and f"{len(DOCS)}/{len(DOCS)}" in bar


def test_unknown_signature_or_output_is_a_one_line_user_error(export_dir):
    with pytest.raises(UserError) as error:
        client.decode_documents(export_dir, DOCS, signature="nope", progress=False)
    assert str(error.value) == (
        f"SavedModel has no 'nope' signature: it must be one of {SIGNATURES}. "
        "Received: signature='nope'"
    )
    with pytest.raises(UserError, match=r"Received: outputs=\['attention'\]"):
        client.decode_outputs(export_dir, DOCS, outputs=("attention",))


def test_headlines_in_batches_decodes_with_a_search_function():
    calls = []

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def search(documents):
        return tf.strings.reduce_join(
            tf.strings.split(documents)[:, :1], axis=1, separator=" "
        )

    def counted(documents):
        calls.append(int(documents.shape[0]))
        return search(documents)

    out = client.headlines_in_batches(counted, DOCS, batch_size=3)
    assert out == [d.split()[0] for d in DOCS]
    assert calls == [3, 2]
