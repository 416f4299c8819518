"""Minimum-risk fine-tuning of a trained summarizer (a `train.py` stage).

After likelihood training (or distillation), each member is fine-tuned on
the expected ROUGE cost of its own headlines by Edunov et al. 2018's recipe
(fairseq's `sequence_risk` criterion combined with the token-level loss):
for every training document the model's beam gives its `risk_candidates`
best headlines (or samples them; the reference is added only if asked), the
teacher-forced model scores them, and `keras_attn.minimum_risk_loss` weighs
each one's cost `100 * (1 - ROUGE)` by the softmax of its length-normalized
log-probability. The loss is `(1 - a) * risk + a * likelihood`, the
likelihood the model's own training loss on the reference (label smoothing
included), `a = risk_nll_weight`. Adam's learning rate rises linearly over
the first `risk_warmup_updates`.

The stage's schedule, counted in updates, is the schedule module's
(`models.training.schedule.RiskSchedule`): at most `risk_updates` batches,
read pass after pass over the training set (`models.data.stream_batches`,
so a resumed stage reads the batches a stage never cut would); validation
ROUGE-1 of greedy headlines before the first update and every
`risk_validate_every` updates; a stop after `risk_patience` validations
without a better score, not before `risk_min_updates`. If no validation
beats the likelihood model, the member keeps its weights.

The stage lives in `<member>/risk/`: its weights at the last validation
(with the update count, so that the same command resumes there; Adam's
moments start afresh), the best weights by validation ROUGE-1, and
`state.json`. The command's caps (`callbacks.TrainingCap`) bound the stage
as they bound training: each of its validations counts as one, and a stage
they cut is resumed by the same command (its member is not served until
then).
"""

import time
from pathlib import Path

import keras
import tensorflow as tf
from keras import ops

import keras_attn
from models import data
from models.decoding.headline_module import headline_search
from models.scoring.metrics import mean_rouge
from models.settings.errors import UserError
from models.settings.folder_layout import (
    BEST_WEIGHTS_FILE,
    LATEST_WEIGHTS_FILE,
    RISK_DIR,
    RISK_STATE_FILE,
)
from models.settings.json_files import read_json, write_json
from models.settings.search import SearchOptions
from models.text.features import END_ID, PAD_ID, START_ID, UNK_ID

# The costs' scale: `100 * (1 - ROUGE)`, the 0-100 scale of fairseq's
# `100 - BLEU`, which its weight of the likelihood loss assumes.
COST_SCALE = 100.0


class LinearWarmUp(keras.optimizers.schedules.LearningRateSchedule):
    """`rate * min(1, (step + 1) / warmup_updates)`: a linear rise from 0
    over the first `warmup_updates` updates, then `rate` (0: no warm-up)."""

    def __init__(self, rate, warmup_updates):
        self.rate = float(rate)
        self.warmup_updates = int(warmup_updates)

    def __call__(self, step):
        if not self.warmup_updates:
            return ops.convert_to_tensor(self.rate, "float32")
        risen = (ops.cast(step, "float32") + 1.0) / self.warmup_updates
        return self.rate * ops.minimum(1.0, risen)

    def get_config(self):
        return {"rate": self.rate, "warmup_updates": self.warmup_updates}


class _Step:
    """The stage's train step: draw, score, weigh by cost, descend."""

    def __init__(self, model, options, max_length):
        self.model = model
        self.options = options
        self.max_length = max_length
        rate = LinearWarmUp(options.risk_learning_rate, options.risk_warmup_updates)
        self.optimizer = keras.optimizers.Adam(rate, clipnorm=2.0)
        self.optimizer.build(model.trainable_variables)
        self.seed = keras.random.SeedGenerator(0)
        # One trace for every batch shape: with shapes relaxed one input at a
        # time, the batch of the candidates and of the references could
        # differ statically, which the in-graph ROUGE cannot broadcast.
        ids = tf.TensorSpec([None, None], tf.int32)
        inputs = {"source_ids": ids, "source_ext_ids": ids, "target_in": ids}
        self.call = tf.function(self._train_step, input_signature=[inputs, ids])

    def _candidates(self, inputs, target_out):
        model, options = self.model, self.options
        drawn = options.risk_candidates - int(options.risk_include_reference)
        state, memory = model.initial_decoder_state(
            inputs["source_ids"], inputs["source_ext_ids"]
        )
        # The search's rows: `drawn` a document, beams or samples alike.
        memory = keras_attn.tile_batch(memory, drawn)
        kernel = model.output_kernel()

        def step(ids, state):
            return model.step(ids, state, memory, output_kernel=kernel)

        if options.risk_method == "sample":
            search = {"temperature": options.risk_temperature, "seed": self.seed}
        else:
            search = {"length_penalty": 1.0}
        batch = ops.shape(inputs["source_ids"])[0]
        return keras_attn.draw_candidates(
            step,
            state,
            ops.full((batch,), START_ID, "int32"),
            END_ID,
            self.max_length,
            options.risk_candidates,
            method=options.risk_method,
            reference_ids=target_out if options.risk_include_reference else None,
            pad_id=PAD_ID,
            banned_ids=[PAD_ID, START_ID],
            **search,
        )

    def _train_step(self, inputs, target_out):
        """`(loss, risk)` of one update on the batch."""
        model, k, length = self.model, self.options.risk_candidates, self.max_length
        # ROUGE on ids compares static widths; a bucketed batch has none.
        padding = ops.zeros((ops.shape(target_out)[0], length), "int32")
        references = ops.concatenate([ops.cast(target_out, "int32"), padding], 1)
        references = ops.reshape(references[:, :length], (-1, length))
        drawn = self._candidates(inputs, references)
        # Static ranks and widths for the in-graph ROUGE.
        candidates = ops.reshape(drawn.ids, (-1, k, length))
        ids = ops.reshape(candidates, (-1, length))
        # The decoder reads a copied word as <unk>, as in likelihood training.
        previous = ops.where(ids < model.config.vocab_size, ids, UNK_ID)
        start = ops.full((ops.shape(ids)[0], 1), START_ID, "int32")
        tiled = {
            "source_ids": ops.repeat(inputs["source_ids"], k, axis=0),
            "source_ext_ids": ops.repeat(inputs["source_ext_ids"], k, axis=0),
            "target_in": ops.concatenate([start, previous[:, :-1]], axis=1),
        }
        weight = self.options.risk_nll_weight
        with tf.GradientTape() as tape:
            outputs = model(tiled, training=True)
            log_probs = model.target_log_probability(outputs, tiled, ids)
            risk = keras_attn.minimum_risk_loss(
                ops.reshape(log_probs, (-1, k, length)),
                candidates,
                references,
                token_mask=ops.reshape(drawn.token_mask, (-1, k, length)),
                candidate_mask=ops.reshape(drawn.candidate_mask, (-1, k)),
                end_id=END_ID,
                pad_id=PAD_ID,
                alpha=self.options.risk_alpha,
                length_normalize=self.options.risk_length_normalize,
                cost_scale=COST_SCALE,
            )
            loss = risk
            if weight > 0:
                reference = model(inputs, training=True)
                likelihood = model.compute_loss(inputs, target_out, reference)
                loss = (1.0 - weight) * risk + weight * likelihood
        gradients = tape.gradient(loss, model.trainable_variables)
        self.optimizer.apply(gradients, model.trainable_variables)
        return loss, risk


def _validation_rouge1(greedy, documents, references):
    """Mean ROUGE-1 F1 x 100 of the headlines of `greedy`
    (`headline_module.headline_search`)."""
    return mean_rouge(greedy(documents), references, ("rouge1",))["rouge1"]


def fine_tune(
    model,
    examples,
    validation,
    features,
    options,
    member_dir,
    *,
    schedule,
    batch_size,
    seed=0,
    cap=None,
    on_validation=None,
):
    """Fine-tunes `model` in place by minimum risk; resumes in `member_dir`.

    Args:
        model: a trained `HeadlineSummarizer` (its best likelihood weights).
        examples: the training examples (`models.data.encode_dataset`),
            cached: the stage reads them pass after pass.
        validation: `(documents, references)` for early stopping.
        features: the run's `TextFeatures`.
        options: `models.settings.risk.RiskOptions`: how an update draws and
            weighs its candidates.
        member_dir: the member's run folder; the stage writes `risk/` there.
        schedule: the stage's `models.training.schedule.RiskSchedule`: when
            it validates and stops.
        batch_size: examples per update.
        seed: the shuffling seed of the passes.
        cap: the command's `callbacks.TrainingCap` (None: no cap): no
            interval between validations starts once it has run out.
        on_validation: None, or called at each validation after an interval
            with the keywords `updates` (done in all), `interval_updates`,
            `seconds` (the interval's), `score` (validation ROUGE-1),
            `before` (before any update), `best_updates` and `since_best`
            (validations since the best).

    Returns:
        `{"finished", "updates", "best_updates", "rouge1": [by validation,
        the first before any update], "examples_per_second"}`: what the
        stage did; not `finished` if the cap cut it.
    """
    folder = Path(member_dir) / RISK_DIR
    folder.mkdir(parents=True, exist_ok=True)
    step = _Step(model, options, features.max_target_length + 1)
    greedy = headline_search(model, features, SearchOptions(), 1)  # traced once
    state = _start_or_resume(model, step, greedy, validation, folder)
    batches = None
    while not _finished(schedule, state):
        if cap is not None and cap.spent():
            break
        if batches is None:  # read a pass only where updates remain
            batches = _stream(examples, batch_size, seed, model, schedule, state)
        count = schedule.interval(state["updates"])
        seconds, read = _run_interval(step, batches, count)
        score = _validation_rouge1(greedy, *validation)
        state["seconds"] += seconds
        state["examples"] += read
        _record_validation(state, score, count, model, folder)
        if on_validation is not None:
            on_validation(
                updates=state["updates"],
                interval_updates=count,
                seconds=seconds,
                score=score,
                before=state["rouge1"][0],
                best_updates=state["validated_at"][state["best_validation"]],
                since_best=_since_best(state),
            )
        if cap is not None:
            cap.validation_done()
    model.load_weights(folder / BEST_WEIGHTS_FILE)
    return {
        "finished": _finished(schedule, state),
        "updates": state["updates"],
        "best_updates": state["validated_at"][state["best_validation"]],
        "rouge1": [round(r, 2) for r in state["rouge1"]],
        "examples_per_second": round(
            state["examples"] / max(state["seconds"], 1e-9), 1
        ),
    }


def _since_best(state):
    """Validations since the best one, the first (before any update) counted."""
    return len(state["rouge1"]) - 1 - state["best_validation"]


def _finished(schedule, state):
    updates = state["updates"]
    return schedule.finished(updates, schedule.stops_early(updates, _since_best(state)))


def _stream(examples, batch_size, seed, model, schedule, state):
    """An iterator over the training batches from the stage's state on, the
    passes one after another (`models.data.stream_batches`), where
    `schedule` says it goes on."""
    source_length = model.config.max_source_length
    one_pass = data.pass_batches(
        examples, batch_size, seed=seed, index=0, max_source_length=source_length
    )
    start = schedule.start(state["updates"], data.count_batches(one_pass))
    return iter(
        data.stream_batches(
            examples,
            batch_size,
            seed=seed,
            max_source_length=source_length,
            start=start,
        )
    )


def read_state(folder):
    """The stage's state in `folder` (its `risk/`), or None where it has
    none: `updates` (done), `validated_at` (the updates at each validation,
    the first 0), `rouge1` (by validation), `best_validation` (an index of
    those), and the `seconds` and `examples` of its updates.

    The file is one JSON object with these keys; one without `updates`
    is refused, not guessed at.

    Raises:
        UserError: the state holds no `updates`.
    """
    path = Path(folder) / RISK_STATE_FILE
    state = read_json(path)
    if state is not None and "updates" not in state:
        raise UserError(
            f"The minimum-risk state `{path}` must hold `updates` (remove "
            f"{folder} to start the stage again). Received: keys={sorted(state)}"
        )
    return state


def _start_or_resume(model, step, greedy, validation, folder):
    """The stage's state: read from `folder` (the weights and the update
    count of its last validation restored), or new, after a first
    validation whose weights become the best so far."""
    state = read_state(folder)
    if state is not None:
        if state["updates"]:
            model.load_weights(folder / LATEST_WEIGHTS_FILE)
            step.optimizer.iterations.assign(state["updates"])
        return state
    score = _validation_rouge1(greedy, *validation)
    model.save_weights(folder / BEST_WEIGHTS_FILE)
    state = {
        "updates": 0,
        "validated_at": [0],
        "rouge1": [score],
        "best_validation": 0,
        "seconds": 0.0,
        "examples": 0,
    }
    write_json(folder / RISK_STATE_FILE, state)
    return state


def _run_interval(step, batches, count):
    """`count` updates from the iterator `batches`, with a progress bar;
    returns `(seconds, examples read)`."""
    start, examples = time.monotonic(), 0
    progress = keras.utils.Progbar(count, stateful_metrics=["loss", "risk"])
    for i in range(count):
        inputs, target_out = next(batches)
        loss, risk = step.call(inputs, target_out)
        examples += int(ops.shape(target_out)[0])
        progress.update(i + 1, [("loss", float(loss)), ("risk", float(risk))])
    return time.monotonic() - start, examples


def _record_validation(state, score, count, model, folder):
    """Adds a validation after `count` more updates to `state`, saves the
    weights (the best ones too if `score` beats every earlier one) and the
    state."""
    state["updates"] += count
    state["validated_at"].append(state["updates"])
    state["rouge1"].append(score)
    if score > max(state["rouge1"][:-1]):
        state["best_validation"] = len(state["rouge1"]) - 1
        model.save_weights(folder / BEST_WEIGHTS_FILE)
    model.save_weights(folder / LATEST_WEIGHTS_FILE)
    write_json(folder / RISK_STATE_FILE, state)
