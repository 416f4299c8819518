"""Minimum-risk fine-tuning of a trained summarizer (a `train.py` stage).

After likelihood training (or distillation), each member is fine-tuned on
the expected ROUGE cost of its own headlines (Shen et al. 2016; Ayana et
al. 2016 for headlines; Edunov et al. 2018): for every training document,
`candidates - 1` headlines are sampled from the model (the reference is the
first candidate), the teacher-forced model scores them, and
`keras_attn.minimum_risk_loss` weighs each one's `1 - ROUGE` by its
renormalised probability, mixed with the reference's likelihood.

The stage lives in `<member>/risk/`: its weights after each epoch (with the
optimizer and the epoch, so that the same command resumes there), the best
weights by validation ROUGE-1, and `state.json`. Early stopping follows
validation ROUGE-1 of greedy headlines, measured before the first epoch
too: if no epoch beats the likelihood model, the member keeps its weights.
The command's caps (`callbacks.TrainingCap`) bound the stage as they bound
training: each epoch's validation counts as one, and a stage they cut is
resumed by the same command (its member is not served until then).
"""

import json
import sys
import time
from pathlib import Path

import keras
import tensorflow as tf
from keras import ops

import keras_attn
from models.callbacks import greedy_search_function
from models.folder_layout import (
    BEST_WEIGHTS_FILE,
    LATEST_WEIGHTS_FILE,
    RISK_DIR,
    RISK_STATE_FILE,
)
from models.metrics import mean_rouge
from models.saved_model_client import headlines_in_batches
from models.text_features import END_ID, PAD_ID, START_ID, UNK_ID


class _Step:
    """The stage's train step: draw, score, weigh by cost, descend."""

    def __init__(self, model, options, max_length):
        self.model = model
        self.options = options
        self.max_length = max_length
        self.optimizer = keras.optimizers.Adam(options.risk_learning_rate, clipnorm=2.0)
        self.optimizer.build(model.trainable_variables)
        self.seed = keras.random.SeedGenerator(0)
        # One trace for every batch shape: with shapes relaxed one input at a
        # time, the batch of the candidates and of the references could
        # differ statically, which the in-graph ROUGE cannot broadcast.
        ids = tf.TensorSpec([None, None], tf.int32)
        inputs = {"source_ids": ids, "source_ext_ids": ids, "target_in": ids}
        self.call = tf.function(self._train_step, input_signature=[inputs, ids])

    def _candidates(self, inputs, target_out):
        model, k = self.model, self.options.risk_candidates
        state, memory = model.initial_decoder_state(
            inputs["source_ids"], inputs["source_ext_ids"]
        )
        memory = keras_attn.tile_batch(memory, k - 1)
        kernel = model.output_kernel()

        def step(ids, state):
            return model.step(ids, state, memory, output_kernel=kernel)

        batch = ops.shape(inputs["source_ids"])[0]
        return keras_attn.draw_candidates(
            step,
            state,
            ops.full((batch,), START_ID, "int32"),
            END_ID,
            self.max_length,
            k,
            method="sample",
            reference_ids=target_out,
            pad_id=PAD_ID,
            banned_ids=[PAD_ID, START_ID],
            temperature=self.options.risk_temperature,
            seed=self.seed,
        )

    def _train_step(self, inputs, target_out):
        model, k = self.model, self.options.risk_candidates
        # ROUGE on ids compares static widths; a bucketed batch has none.
        padding = ops.zeros((ops.shape(target_out)[0], self.max_length), "int32")
        target_out = ops.concatenate([ops.cast(target_out, "int32"), padding], 1)
        target_out = ops.reshape(
            target_out[:, : self.max_length], (-1, self.max_length)
        )
        drawn = self._candidates(inputs, target_out)
        # Static ranks and widths for the in-graph ROUGE.
        length = self.max_length
        candidates = ops.reshape(drawn.ids, (-1, k, length))
        token_mask = ops.reshape(drawn.token_mask, (-1, k, length))
        candidate_mask = ops.reshape(drawn.candidate_mask, (-1, k))
        ids = ops.reshape(candidates, (-1, length))
        # The decoder reads a copied word as <unk>, as in likelihood training.
        previous = ops.where(ids < model.config.vocab_size, ids, UNK_ID)
        start = ops.full((ops.shape(ids)[0], 1), START_ID, "int32")
        tiled = {
            "source_ids": ops.repeat(inputs["source_ids"], k, axis=0),
            "source_ext_ids": ops.repeat(inputs["source_ext_ids"], k, axis=0),
            "target_in": ops.concatenate([start, previous[:, :-1]], axis=1),
        }
        with tf.GradientTape() as tape:
            outputs = model(tiled, training=True)
            log_probs = model.target_log_probability(outputs, tiled, ids)
            log_probs = ops.reshape(log_probs, (-1, k, self.max_length))
            loss = keras_attn.minimum_risk_loss(
                log_probs,
                candidates,
                target_out,
                token_mask=token_mask,
                candidate_mask=candidate_mask,
                end_id=END_ID,
                pad_id=PAD_ID,
                alpha=self.options.risk_alpha,
                nll_weight=self.options.risk_nll_weight,
                reference_log_probs=log_probs[:, 0],
                reference_mask=token_mask[:, 0],
            )
        gradients = tape.gradient(loss, model.trainable_variables)
        self.optimizer.apply(gradients, model.trainable_variables)
        return loss


def _validation_rouge1(greedy, documents, references):
    """Mean ROUGE-1 F1 x 100 of the headlines of `greedy`
    (`callbacks.greedy_search_function`)."""
    headlines = headlines_in_batches(greedy, documents)
    return mean_rouge(headlines, references, ("rouge1",))["rouge1"]


def fine_tune(
    model, batches, steps, validation, features, options, member_dir, cap=None
):
    """Fine-tunes `model` in place by minimum risk; resumes in `member_dir`.

    Args:
        model: a trained `HeadlineSummarizer` (its best likelihood weights).
        batches: `(inputs, target_out)` training batches, one epoch.
        steps: batches an epoch, for the progress line.
        validation: `(documents, references)` for early stopping.
        features: the run's `TextFeatures`.
        options: `models.config.RiskOptions`.
        member_dir: the member's run folder; the stage writes `risk/` there.
        cap: the command's `callbacks.TrainingCap` (None: no cap): no epoch
            starts once it has run out.

    Returns:
        `{"finished", "epochs", "best_epoch", "rouge1": [by epoch, the first
        before any], "examples_per_second"}`: what the stage did; not
        `finished` if the cap cut it.
    """
    folder = Path(member_dir) / RISK_DIR
    folder.mkdir(parents=True, exist_ok=True)
    state_path = folder / RISK_STATE_FILE
    state = json.loads(state_path.read_text()) if state_path.exists() else None
    step = _Step(model, options, features.max_target_length + 1)
    greedy = greedy_search_function(model, features)  # traced once, used each epoch
    if state is None:
        score = _validation_rouge1(greedy, *validation)
        model.save_weights(folder / BEST_WEIGHTS_FILE)
        state = {"epoch": 0, "best_epoch": 0, "rouge1": [score], "seconds": 0.0}
        state["examples"] = 0
        _write_state(state_path, state)
    elif state["epoch"]:
        model.load_weights(folder / LATEST_WEIGHTS_FILE)
        step.optimizer.iterations.assign(state["steps"])
    cut = False
    while not _done(state, options):
        if cap is not None and cap.spent():
            cut = True
            break
        start, examples = time.monotonic(), 0
        progress = keras.utils.Progbar(steps, stateful_metrics=["risk"])
        for i, (inputs, target_out) in enumerate(batches):
            loss = step.call(inputs, target_out)
            examples += int(ops.shape(target_out)[0])
            progress.update(i + 1, [("risk", float(loss))])
        score = _validation_rouge1(greedy, *validation)
        state["epoch"] += 1
        state["rouge1"].append(score)
        state["seconds"] += time.monotonic() - start
        state["examples"] += examples
        state["steps"] = int(step.optimizer.iterations)
        if score > max(state["rouge1"][:-1]):
            state["best_epoch"] = state["epoch"]
            model.save_weights(folder / BEST_WEIGHTS_FILE)
        model.save_weights(folder / LATEST_WEIGHTS_FILE)
        _write_state(state_path, state)
        print(
            f"minimum risk, epoch {state['epoch']}: validation ROUGE-1 "
            f"{score:.2f} (before: {state['rouge1'][0]:.2f}, best at epoch "
            f"{state['best_epoch']})",
            file=sys.stderr,
        )
        if cap is not None:
            cap.validation_done()
    model.load_weights(folder / BEST_WEIGHTS_FILE)
    return {
        "finished": not cut,
        "epochs": state["epoch"],
        "best_epoch": state["best_epoch"],
        "rouge1": [round(r, 2) for r in state["rouge1"]],
        "examples_per_second": round(
            state["examples"] / max(state["seconds"], 1e-9), 1
        ),
    }


def _done(state, options):
    since_best = state["epoch"] - state["best_epoch"]
    return state["epoch"] >= options.risk_epochs or since_best >= options.risk_patience


def _write_state(path, state):
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(path)
