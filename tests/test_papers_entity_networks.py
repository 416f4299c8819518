"""Entity Networks on bAbI (`papers/entity_networks.py`): parser, data, smoke run.

The tests write their own few stories in the bAbI format; they never read the
real data. The end-to-end run trains a tiny EntNet for two epochs.
"""

import json

import numpy as np
import pytest

STORIES = """\
1 Mary moved to the bathroom.
2 John went to the hallway.
3 Where is Mary?\tbathroom\t1
4 Daniel went back to the hallway.
5 Where is Daniel?\thallway\t4
1 Sandra travelled to the office.
2 How do you go from the office to the garden?\tn,w\t1
"""


@pytest.fixture(scope="module")
def example():
    from papers import entity_networks

    return entity_networks


def _write_task(root, subset, task, train, test):
    folder = root / subset
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"qa{task}_made-up_train.txt").write_text(train)
    (folder / f"qa{task}_made-up_test.txt").write_text(test)


def _synthetic_stories(rng, n):
    """Task-1-like stories: where is a person after a few moves."""
    people = ["mary", "john", "sandra", "daniel"]
    places = ["kitchen", "garden", "office", "hallway"]
    lines = []
    for _ in range(n):
        where, ident = {}, 1
        for _ in range(rng.integers(2, 6)):
            who, place = rng.choice(people), rng.choice(places)
            where[who] = place
            lines.append(f"{ident} {who.title()} went to the {place}.")
            ident += 1
        who = rng.choice(sorted(where))
        lines.append(f"{ident} Where is {who.title()}?\t{where[who]}\t1")
    return "\n".join(lines) + "\n"


def test_parse_babi_splits_stories_and_drops_questions(example):
    examples = example.parse_babi(STORIES.splitlines())
    assert examples == [
        ([["mary", "moved", "to", "the", "bathroom"],
          ["john", "went", "to", "the", "hallway"]],
         ["where", "is", "mary"], "bathroom"),
        ([["mary", "moved", "to", "the", "bathroom"],
          ["john", "went", "to", "the", "hallway"],
          ["daniel", "went", "back", "to", "the", "hallway"]],
         ["where", "is", "daniel"], "hallway"),
        ([["sandra", "travelled", "to", "the", "office"]],
         ["how", "do", "you", "go", "from", "the", "office", "to", "the", "garden"],
         "n,w"),
    ]  # fmt: skip


def test_parse_babi_rejects_a_line_without_id(example):
    with pytest.raises(ValueError, match="line 2"):
        example.parse_babi(["1 Mary moved to the bathroom.", "Where is Mary?"])


def test_vectorize_keeps_the_last_sentences(example):
    examples = example.parse_babi(STORIES.splitlines())
    vocab = [
        "<pad>",
        *sorted({w for s, q, a in examples for x in [*s, q, [a]] for w in x}),
    ]
    index = {w: i for i, w in enumerate(vocab)}
    stories, questions, answers = example.vectorize(examples, index, 2, 10)
    assert stories.shape == (3, 2, 10) and questions.shape == (3, 10)
    # The second question's story has three sentences: the first is cut.
    assert [vocab[i] for i in stories[1, 0] if i] == [
        "john",
        "went",
        "to",
        "the",
        "hallway",
    ]
    assert [vocab[i] for i in stories[2, 1]] == ["<pad>"] * 10
    assert vocab[answers[2]] == "n,w"


def test_task_files_fall_back_to_the_1k_set(example, tmp_path):
    _write_task(tmp_path, "en-10k", 1, STORIES, STORIES)
    _write_task(tmp_path, "en", 3, STORIES, STORIES)
    assert example.task_files(tmp_path, 1)[2] == "en-10k"
    assert example.task_files(tmp_path, 3)[2] == "en"
    with pytest.raises(FileNotFoundError, match="task 2"):
        example.task_files(tmp_path, 2)
    assert example.max_story_sentences(3) == 130
    assert example.max_story_sentences(1) == 70


def test_length_buckets_cut_batches_to_their_bucket(example):
    stories = np.zeros((10, 8, 3), "int32")
    lengths = [1, 2, 2, 3, 4, 5, 6, 8, 8, 1]
    for i, n in enumerate(lengths):
        stories[i, :n, 0] = 1
    split = (stories, np.ones((10, 3), "int32"), np.arange(10))
    buckets = example.LengthBuckets(split, batch_size=2, seed=0, bucket_width=None)
    assert buckets.bounds == [2, 4, 8]
    seen = []
    for i in range(len(buckets)):
        (batch, questions), answers = buckets[i]
        assert batch.shape[1] in (2, 4, 8) and len(batch) == len(questions)
        # Every story fits its batch's length, in the smallest bucket that holds it.
        for j, story in zip(answers, batch, strict=True):
            assert lengths[j] <= batch.shape[1] < 2 * max(lengths[j], 2)
            np.testing.assert_array_equal(story, stories[j, : batch.shape[1]])
        seen.extend(answers)
    assert sorted(seen) == list(range(10))
    # The first batches show every length (the TensorFlow adapter peeks at them).
    assert sorted(buckets[i][0][0].shape[1] for i in range(3)) == [2, 4, 8]


def test_length_buckets_by_width_and_epoch(example):
    stories = np.zeros((10, 8, 3), "int32")
    for i, n in enumerate([1, 2, 2, 3, 4, 5, 6, 8, 8, 1]):
        stories[i, :n, 0] = 1
    split = (stories, np.ones((10, 3), "int32"), np.arange(10))
    buckets = example.LengthBuckets(split, batch_size=2, seed=3, bucket_width=3)
    assert buckets.bounds == [3, 6, 8]
    first = [b[1].tolist() for b in buckets.batches]
    buckets.on_epoch_end()
    second = [b[1].tolist() for b in buckets.batches]
    assert buckets.epoch == 1 and second != first
    # A resumed run draws epoch 1's batches without replaying epoch 0.
    again = example.LengthBuckets(split, batch_size=2, seed=3, bucket_width=3)
    again.shuffle(1)
    assert [b[1].tolist() for b in again.batches] == second


def _fixed_weights(model, seed=0):
    rng = np.random.default_rng(seed)
    model.set_weights(
        [rng.normal(0, 0.3, w.shape).astype("float32") for w in model.get_weights()]
    )


@pytest.mark.tf_only
def test_a_batch_cut_to_its_bucket_has_the_same_loss_and_gradients(example):
    """The fine buckets' speed-up only drops padded sentences: the loss and
    every gradient equal those of the batch padded to the longest story."""
    import keras

    rng = np.random.default_rng(1)
    stories = np.zeros((4, 9, 3), "int32")
    for i, n in enumerate([2, 3, 3, 1]):
        stories[i, :n] = rng.integers(1, 7, (n, 3))
    questions = rng.integers(1, 7, (4, 3)).astype("int32")
    answers = np.array([1, 4, 2, 6])
    model, _ = example.build_model(7, 3, dim=4, slots=3)
    _fixed_weights(model)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def loss_and_grads(batch):
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = loss_fn(answers, model([batch, questions]))
        grads = tape.gradient(loss, model.trainable_weights)
        return float(loss), [tf.convert_to_tensor(g).numpy() for g in grads]

    full_loss, full_grads = loss_and_grads(stories)
    cut_loss, cut_grads = loss_and_grads(stories[:, :3])
    assert full_loss > 0.1
    np.testing.assert_allclose(cut_loss, full_loss, rtol=1e-6)
    for cut, full in zip(cut_grads, full_grads, strict=True):
        np.testing.assert_allclose(cut, full, atol=1e-6)


def test_the_slope_is_tied_across_memory_and_output(example):
    model, _ = example.build_model(7, 3, dim=4, slots=3)
    paths = [w.path for w in model.trainable_weights]
    assert sum(p.endswith("alpha") for p in paths) == 1
    untied, _ = example.build_model(7, 3, dim=4, slots=3, tied_slope=False)
    assert sum(w.path.endswith("alpha") for w in untied.trainable_weights) == 2
    output = model.get_layer("output")
    assert output.slope_source is model.get_layer("memory").cell
    assert [w.path for w in output.weights if w.path.startswith("output/")] == [
        "output/hidden_kernel",
        "output/output_kernel",
    ]


def _numpy_error(model, split):
    """The share of wrong answers, from the model's logits in numpy."""
    stories, questions, answers = split
    logits = np.asarray(model([stories, questions]))
    return float(np.mean(logits.argmax(axis=1) != np.asarray(answers)))


@pytest.mark.slow
@pytest.mark.tf_only
def test_example_runs_end_to_end(example, tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    _write_task(
        tmp_path, "en-10k", 1, _synthetic_stories(rng, 60), _synthetic_stories(rng, 20)
    )
    models, real_train_run = [], example.train_run

    def train_run(*args, **kwargs):
        out = real_train_run(*args, **kwargs)
        models.append(out[0])
        return out

    monkeypatch.setattr(example, "train_run", train_run)
    output = tmp_path / "out"
    result = example.run(
        task=1, data_dir=tmp_path, output=output, epochs=2, runs=2, dim=8,
        slots=3, batch_size=8, progress=False,
    )  # fmt: skip
    saved = json.loads((output / "entnet_task1.json").read_text())
    assert saved["test_error"] == result["test_error"]
    assert [r["seed"] for r in result["runs"]] == [0, 1]
    # Each run ends with its best epoch's weights: their validation error is
    # the one it reports; the test error is the best run's, on the test set.
    data = example.load_task(tmp_path, 1, seed=0)
    for model, run in zip(models, result["runs"], strict=True):
        assert run["val_error"] == pytest.approx(_numpy_error(model, data["val"]))
    assert result["val_error"] == min(r["val_error"] for r in result["runs"])
    assert result["val_error"] == result["runs"][result["best_run"]]["val_error"]
    best = models[result["best_run"]]
    assert result["test_error"] == pytest.approx(_numpy_error(best, data["test"]))
    assert all(1 <= r["best_epoch"] <= r["epochs"] <= 2 for r in result["runs"])
    png = (output / "entnet_task1.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
