"""Recurrent Entity Networks on bAbI (Henaff et al. 2017), one task.

A story's sentences are read one by one into a memory of `--slots` slots
(`EntityMemoryCell` in `keras.layers.RNN`), each sentence encoded by
`PositionEncoder`; the question, encoded the same way (its own position
mask, the same word embeddings), reads the final memory (`EntityOutput`),
whose logits range over the vocabulary (a multi-word answer such as `n,w`
of task 19 is one token of it). Padded words and padded sentences are
masked: a padded sentence leaves the memory unchanged.

Data: bAbI v1.2, read at run time from `--data-dir` (default
`../shared/data/babi`, relative to the checkout): `en-10k/` (10,000 training
questions) for every task whose training file is there, `en/` (1,000) for
the others (task 3). 10% of the training questions (a seeded random draw)
are held out for validation; the epoch and the run with the best validation
error are kept, and the test error is that model's.

As in the paper: embedding and slot width `--dim` 100, 20 slots, the last 70
sentences of a story (130 for task 3), Adam with learning rate 0.01 halved
every 25 epochs, gradient norm clipped at 40, batches of 32, one PReLU slope
tied across the memory and the output (the authors' code). The paper trains
up to 200 epochs and keeps the best of 10 runs (`papers.runner` runs that
recipe, resumable across invocations); here `--epochs` and `--runs` cut that
down. `--max-minutes` (no default) also caps the time of all runs together:
training stops after the epoch that would overrun it, so what a run trains
then depends on the machine. The cap counts this process's CPU time
(`--clock cpu`, the default: on a shared machine it does not depend on the
other jobs) or wall-clock time (`--clock wall`); loading, compiling and
evaluating count.

Outputs, in `--output` (default `papers/output/`): `entnet_task{N}.json`
(errors, epochs, time) and `entnet_task{N}.png`: for one test story, the
write gate `g_j` of every slot at every sentence, and the question's read
attention `p_j` over the slots.

Usage:

```
python -m papers.entity_networks --task 1
python -m papers.entity_networks --task 1 --epochs 20 --runs 2
KERAS_BACKEND=jax python -m papers.entity_networks --task 19 --epochs 50
```
"""

import json
import re
import time
from pathlib import Path

import keras
import numpy as np

from keras_attn import EntityMemoryCell, EntityOutput, PositionEncoder
from models.settings.flags import SettingsParser, check_flags
from papers.records import OUTPUT

# `../shared/data/babi`, beside the checkout.
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "shared/data/babi"
PAD = "<pad>"
# The cap's clock: this process's CPU time (all threads), or wall time.
CLOCKS = {"cpu": time.process_time, "wall": time.monotonic}


# ---------------------------------------------------------------- data


def tokenize(text):
    """Lower-cased words, punctuation dropped: `"Where is Mary?"` ->
    `["where", "is", "mary"]`."""
    return re.findall(r"[a-z0-9]+", text.lower())


def parse_babi(lines):
    """Parses bAbI lines into `(story, question, answer)` examples.

    Args:
        lines: The lines of one bAbI file: `ID text`, or for a question
            `ID question<TAB>answer<TAB>supporting IDs`; ID 1 starts a story.

    Returns:
        A list of `(story, question, answer)`: `story` the tokenized
        statements of the story before the question (questions are not
        part of it), `question` its tokens, `answer` the answer string
        (`"n,w"` kept whole).
    """
    examples, story = [], []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        ident, _, text = line.partition(" ")
        if not ident.isdigit():
            raise ValueError(
                f"A bAbI line must start with its ID. Received line {number}: {line!r}"
            )
        if int(ident) == 1:
            story = []
        if "\t" in text:
            question, answer = text.split("\t")[:2]
            examples.append((list(story), tokenize(question), answer.strip()))
        else:
            story.append(tokenize(text))
    return examples


def task_files(data_dir, task):
    """`(train_path, test_path, subset)` of a task, `en-10k` if it is there."""
    data_dir = Path(data_dir)
    for subset in ("en-10k", "en"):
        train = sorted((data_dir / subset).glob(f"qa{task}_*_train.txt"))
        test = sorted((data_dir / subset).glob(f"qa{task}_*_test.txt"))
        if train and test:
            return train[0], test[0], subset
    raise FileNotFoundError(
        f"No bAbI task {task} under {data_dir} (en-10k/ or en/): pass --data-dir."
    )


def max_story_sentences(task):
    """The paper's cut: the last 130 sentences for task 3, 70 otherwise."""
    return 130 if task == 3 else 70


def vectorize(examples, word_index, max_sentences, max_words):
    """Word ids, zero-padded: stories `(n, max_sentences, max_words)` (the
    last `max_sentences` statements), questions `(n, max_words)`, answers
    `(n,)`."""
    n = len(examples)
    stories = np.zeros((n, max_sentences, max_words), "int32")
    questions = np.zeros((n, max_words), "int32")
    answers = np.zeros((n,), "int32")
    for i, (story, question, answer) in enumerate(examples):
        for t, sentence in enumerate(story[-max_sentences:]):
            stories[i, t, : len(sentence)] = [word_index[w] for w in sentence]
        questions[i, : len(question)] = [word_index[w] for w in question]
        answers[i] = word_index[answer]
    return stories, questions, answers


def load_task(data_dir, task, val_fraction=0.1, seed=0):
    """Reads, splits and vectorizes one task.

    Returns:
        A dict: `train`, `val`, `test` (each `(stories, questions, answers)`),
        `vocab` (index to word, 0 the padding), `max_sentences`, `max_words`,
        `subset` and `test_stories` (the raw test examples, for the picture).
    """
    train_path, test_path, subset = task_files(data_dir, task)
    train = parse_babi(train_path.read_text().splitlines())
    test = parse_babi(test_path.read_text().splitlines())
    words = set()
    for story, question, answer in train + test:
        words.update(w for sentence in story for w in sentence)
        words.update(question)
        words.add(answer)
    vocab = [PAD, *sorted(words)]
    word_index = {w: i for i, w in enumerate(vocab)}
    max_sentences = min(
        max_story_sentences(task), max(len(s) for s, _, _ in train + test)
    )
    max_words = max(
        len(x) for s, q, _ in train + test for x in [q, *s[-max_sentences:]]
    )
    order = np.random.default_rng(seed).permutation(len(train))
    n_val = max(1, int(round(val_fraction * len(train))))
    parts = {
        "train": [train[i] for i in order[n_val:]],
        "val": [train[i] for i in order[:n_val]],
        "test": test,
    }
    data = {
        name: vectorize(examples, word_index, max_sentences, max_words)
        for name, examples in parts.items()
    }
    data.update(
        vocab=vocab,
        max_sentences=max_sentences,
        max_words=max_words,
        subset=subset,
        test_stories=test,
    )
    return data


class LengthBuckets(keras.utils.PyDataset):
    """Training batches of stories of similar length, cut to their bucket.

    Most stories are far shorter than the longest (task 2: median 14
    sentences of up to 70), and a padded sentence still costs a step of the
    RNN. Each story goes to the smallest bucket length that holds it, a
    batch is drawn from one bucket and cut to its length. Bucket lengths are
    the multiples of `bucket_width` (and the longest story), or with
    `bucket_width=None` the three lengths `T/4, T/2, T`: one shape to compile
    per bucket. Batches are reshuffled every epoch, by `(seed, epoch)`, so
    that a resumed run sees the batches it would have seen.

    Args:
        split: `(stories, questions, answers)`, stories `(n, T, L)`,
            zero-padded at the end.
        batch_size: Batch size.
        seed: Seed of the shuffles.
        bucket_width: Sentences between bucket lengths, or None.
    """

    def __init__(self, split, batch_size, seed=0, bucket_width=5):
        super().__init__()
        self.stories, self.questions, self.answers = split
        self.batch_size = batch_size
        self.seed = seed
        total = self.stories.shape[1]
        if bucket_width is None:
            bounds = {max(1, -(-total // 4)), max(1, -(-total // 2)), total}
        else:
            bounds = {*range(bucket_width, total, bucket_width), total}
        self.bounds = sorted(bounds)
        lengths = np.any(self.stories != 0, axis=-1).sum(axis=-1)
        self.bucket_of = np.searchsorted(self.bounds, lengths)
        self.epoch = 0
        self.shuffle(0)

    def shuffle(self, epoch):
        """Sets the batches of `epoch` (a seeded draw of `(seed, epoch)`)."""
        self.epoch = epoch
        rng = np.random.default_rng([self.seed, epoch])
        batches = []
        for bucket in range(len(self.bounds)):
            members = rng.permutation(np.flatnonzero(self.bucket_of == bucket))
            for start in range(0, len(members), self.batch_size):
                batches.append((bucket, members[start : start + self.batch_size]))
        batches = [batches[i] for i in rng.permutation(len(batches))]
        # One batch of every length first: the TensorFlow adapter infers the
        # input signature (a length or None) from the first batches.
        firsts = {}
        for i, (bucket, _) in enumerate(batches):
            firsts.setdefault(bucket, i)
        front = sorted(firsts.values())
        rest = [b for i, b in enumerate(batches) if i not in firsts.values()]
        self.batches = [batches[i] for i in front] + rest

    def on_epoch_end(self):
        self.shuffle(self.epoch + 1)

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, index):
        bucket, members = self.batches[index]
        stories = self.stories[members, : self.bounds[bucket]]
        return (stories, self.questions[members]), self.answers[members]


# ---------------------------------------------------------------- model


def build_model(
    vocab_size, max_words, dim=100, slots=20, tied_slope=True, use_bias=False
):
    """The EntNet, and a second model on the same layers that also returns
    the gates `(batch, T, slots)` and the read attention `(batch, slots)`.

    With `tied_slope`, the memory and the output share one PReLU slope, as in
    the authors' code; the model's weights then save, its config does not.
    `use_bias` gives the memory the gate and candidate biases of the
    authors' code, drawn from N(0, 0.1) as all their weights are.
    """
    # Any number of sentences: training batches are cut to their length.
    story = keras.Input((None, max_words), dtype="int32", name="story")
    question = keras.Input((max_words,), dtype="int32", name="question")
    embed = keras.layers.Embedding(
        vocab_size,
        dim,
        mask_zero=True,
        embeddings_initializer=keras.initializers.RandomNormal(stddev=0.1),
        name="embedding",
    )
    sentences = PositionEncoder(max_words, name="story_encoder")(embed(story))
    # The bias initializer only with the biases: a seedless initializer
    # draws its seed when made, which would change every later weight.
    biases = (
        {"use_bias": True, "bias_initializer": keras.initializers.RandomNormal(0, 0.1)}
        if use_bias
        else {}
    )
    cell = EntityMemoryCell(slots, dim, return_gates=True, **biases)
    gates, memory = keras.layers.RNN(
        cell,
        return_sequences=True,
        return_state=True,
        zero_output_for_mask=True,
        name="memory",
    )(sentences)
    query = PositionEncoder(max_words, name="question_encoder")(embed(question))
    output = EntityOutput(
        slots, vocab_size, slope_source=cell if tied_slope else None, name="output"
    )
    logits, read = output([query, memory], return_attention_scores=True)
    model = keras.Model([story, question], logits, name="entnet")
    inspect = keras.Model([story, question], [logits, gates, read])
    return model, inspect


class _BestOnValidation(keras.callbacks.Callback):
    """Keeps the weights of the epoch of lowest validation error, halves the
    learning rate every `halve_every` epochs, and stops after the epoch that
    would overrun `deadline` (a time of `clock`)."""

    def __init__(self, val, halve_every, deadline, clock, log):
        super().__init__()
        self.val = val
        self.halve_every = halve_every
        self.deadline = deadline
        self.clock = clock
        self.log = log
        self.best_error = float("inf")
        self.best_epoch = 0
        self.best_weights = None
        self.epochs = 0
        self._start = None

    def on_epoch_begin(self, epoch, logs=None):
        self._start = self.clock()
        if epoch and epoch % self.halve_every == 0:
            lr = self.model.optimizer.learning_rate
            lr.assign(lr * 0.5)

    def on_epoch_end(self, epoch, logs=None):
        self.epochs = epoch + 1
        error = error_rate(self.model, self.val)
        if error < self.best_error:
            self.best_error, self.best_epoch = error, epoch + 1
            self.best_weights = self.model.get_weights()
        self.log(
            f"  epoch {epoch + 1}: loss {logs['loss']:.4f}, val error "
            f"{100 * error:.1f}% ({self.clock() - self._start:.0f}s)"
        )
        elapsed = self.clock() - self._start
        if error == 0 or self.clock() + elapsed > self.deadline:
            self.model.stop_training = True


def error_rate(model, split, batch_size=256):
    stories, questions, answers = split
    logits = model.predict([stories, questions], batch_size=batch_size, verbose=0)
    return float(np.mean(np.argmax(logits, axis=-1) != answers))


def train_run(data, seed, epochs, deadline, clock, dim, slots, lr, batch_size, log):
    """One run: returns `(model, inspect, best_val_error, best_epoch, epochs)`."""
    keras.utils.set_random_seed(seed)
    model, inspect = build_model(len(data["vocab"]), data["max_words"], dim, slots)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=lr, clipnorm=40.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    best = _BestOnValidation(data["val"], 25, deadline, clock, log)
    batches = LengthBuckets(data["train"], batch_size, seed=seed)
    model.fit(batches, epochs=epochs, callbacks=[best], verbose=0)
    if best.best_weights is not None:
        model.set_weights(best.best_weights)
    return model, inspect, best.best_error, best.best_epoch, best.epochs


# ---------------------------------------------------------------- picture


def plot_memory(inspect, data, index, path):
    """Gates over the slots, sentence by sentence, and the read attention,
    for test example `index`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stories, questions, answers = (x[index : index + 1] for x in data["test"])
    logits, gates, read = inspect.predict([stories, questions], verbose=0)
    story, question, answer = data["test_stories"][index]
    story = story[-data["max_sentences"] :]
    gates = np.asarray(gates[0, : len(story)])
    predicted = data["vocab"][int(np.argmax(logits[0]))]
    fig, (top, bottom) = plt.subplots(
        2,
        1,
        figsize=(8, 1.5 + 0.3 * len(story)),
        gridspec_kw={"height_ratios": [max(len(story), 1), 1.5]},
        sharex=True,
    )
    image = top.imshow(gates, aspect="auto", cmap="viridis", vmin=0, vmax=1)
    top.set_yticks(range(len(story)), [" ".join(s) for s in story], fontsize=7)
    top.set_title("write gate g_j per sentence", fontsize=9)
    fig.colorbar(image, ax=top, fraction=0.03)
    bottom.imshow(np.asarray(read)[:1], aspect="auto", cmap="magma", vmin=0)
    bottom.set_yticks([0], ["read p_j"], fontsize=7)
    bottom.set_xticks(range(gates.shape[1]))
    bottom.set_xlabel("memory slot j")
    bottom.set_title(
        f"Q: {' '.join(question)}?  answer: {answer}, predicted: {predicted}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------- main


def _data_summary(task, data):
    """The line that introduces a task: its splits, vocabulary and shapes."""
    return (
        f"task {task} ({data['subset']}): {len(data['train'][2])} train, "
        f"{len(data['val'][2])} val, {len(data['test'][2])} test; vocabulary "
        f"{len(data['vocab'])}, {data['max_sentences']} sentences x "
        f"{data['max_words']} words; backend {keras.backend.backend()}"
    )


def _best_of_runs(data, settings, now, start, seed, log):
    """Trains `settings["runs"]` runs, with seeds from `seed` up; keeps the best.

    With a cap, each run gets an even share of the time left when it starts.

    Args:
        data: `load_task`'s dict.
        settings: `run`'s `dim`, `slots`, `lr`, `batch_size`, `max_epochs`,
            `runs` and `max_minutes` (the cap on all runs together, counted
            by `now` from `start`, or None for no cap).
        now: The cap's clock.
        start: The cap's start, a time of `now`.
        seed: The first run's seed.
        log: Prints a progress line.

    Returns:
        `(best, run_results)`: `(val_error, run_index, model, inspect)` of the
        run of lowest validation error, and a summary dict of each run.
    """
    runs, minutes = settings["runs"], settings["max_minutes"]
    best = None
    run_results = []
    for r in range(runs):
        deadline = float("inf")
        if minutes is not None:
            remaining = 60 * minutes - (now() - start)
            deadline = now() + remaining / (runs - r)
        model, inspect, val_error, best_epoch, n_epochs = train_run(
            data,
            seed + r,
            settings["max_epochs"],
            deadline,
            now,
            settings["dim"],
            settings["slots"],
            settings["lr"],
            settings["batch_size"],
            log,
        )
        run_results.append(
            {
                "seed": seed + r,
                "val_error": val_error,
                "best_epoch": best_epoch,
                "epochs": n_epochs,
            }
        )
        log(f"run {r + 1}: val error {100 * val_error:.1f}% after {n_epochs} epochs")
        if best is None or val_error < best[0]:
            best = (val_error, r, model, inspect)
    return best, run_results


def _write_outputs(result, inspect, data, output, plot):
    """Writes `entnet_task{N}.json` and, with `plot`, `entnet_task{N}.png`."""
    task = result["task"]
    output.mkdir(parents=True, exist_ok=True)
    (output / f"entnet_task{task}.json").write_text(json.dumps(result, indent=2))
    if plot:
        plot_memory(inspect, data, 0, output / f"entnet_task{task}.png")


def run(
    task=1,
    data_dir=DEFAULT_DATA_DIR,
    output=None,
    epochs=200,
    runs=1,
    max_minutes=None,
    clock="cpu",
    dim=100,
    slots=20,
    lr=0.01,
    batch_size=32,
    seed=0,
    plot=True,
    progress=True,
):
    """Trains `runs` runs on one task and evaluates the best on validation.

    Args:
        max_minutes: A cap on the time of all runs together (split
            evenly), or None for no cap.
        clock: What the cap counts: `"cpu"`, this process's CPU time, or
            `"wall"`, wall-clock time.

    Returns:
        A dict of the results (also written to `entnet_task{task}.json`).
    """

    def log(message):
        if progress:
            print(message, flush=True)

    if clock not in CLOCKS:
        raise ValueError(f"`clock` must be one of {sorted(CLOCKS)}. Received: {clock=}")
    now = CLOCKS[clock]
    start = now()
    data = load_task(data_dir, task, seed=seed)
    log(_data_summary(task, data))
    # The settings `entnet_task{N}.json` records, and the runs read.
    settings = {
        "dim": dim,
        "slots": slots,
        "lr": lr,
        "batch_size": batch_size,
        "max_epochs": epochs,
        "runs": runs,
        "max_minutes": max_minutes,
    }
    best, run_results = _best_of_runs(data, settings, now, start, seed, log)
    val_error, best_run, model, inspect = best
    result = {
        "task": task,
        "subset": data["subset"],
        "backend": keras.backend.backend(),
        "n_train": len(data["train"][2]),
        "n_val": len(data["val"][2]),
        "test_error": error_rate(model, data["test"]),
        "val_error": val_error,
        "best_run": best_run,
        "runs": run_results,
        "seconds": now() - start,
        "clock": clock,
        "settings": settings,
    }
    log(f"task {task}: test error {100 * result['test_error']:.1f}%")
    if output is not None:
        _write_outputs(result, inspect, data, Path(output), plot)
    return result


def main(argv=None):
    parser = SettingsParser(
        prog="python -m papers.entity_networks", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--task", type=int, default=1, choices=range(1, 21))
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="cap on the time of all runs together (see --clock; no cap by default)",
    )
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--slots", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(argv)
    check_flags(
        parser,
        args,
        at_least={"epochs": 1, "runs": 1, "dim": 1, "slots": 1, "batch_size": 1},
        above={"max_minutes": 0, "lr": 0},
        folders=["data_dir"],
    )
    run(
        task=args.task,
        data_dir=args.data_dir,
        output=args.output,
        epochs=args.epochs,
        runs=args.runs,
        max_minutes=args.max_minutes,
        clock=args.clock,
        dim=args.dim,
        slots=args.slots,
        lr=args.lr,
        batch_size=args.batch_size,
        seed=args.seed,
        plot=not args.no_plot,
    )


if __name__ == "__main__":
    main()
