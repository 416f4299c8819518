"""What `onmt_train`'s log says: its validations, its speed, how it ended.

OpenNMT-py writes one log line per report window and per validation; a run
resumed from a checkpoint repeats the steps after that checkpoint.
`parse_training_log` reads one or more such runs' output into a
`TrainingLog`, and `training_finished` tells from it whether early stopping
(counted across the resumed runs) has ended the training.
"""

from __future__ import annotations

import dataclasses
import datetime
import re

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ INFO\] (.*)$")
_STEP = re.compile(r"Step\s+(\d+)/\s*\d+;.*sents:\s+(\d+);")


@dataclasses.dataclass
class TrainingLog:
    """What `onmt_train`'s log says: validations, speed, how it ended.

    Attributes:
        validations: `(step, perplexity, accuracy, seconds)` of each
            validation, `seconds` the training time up to it (the time of
            work lost to a kill after a run's last checkpoint not counted).
        examples: training examples in the timed report windows.
        seconds: their wall time (windows holding a validation left out).
        stopped: whether early stopping ended the training.
    """

    validations: list = dataclasses.field(default_factory=list)
    examples: int = 0
    seconds: float = 0.0
    stopped: bool = False

    def best(self):
        """The validation of the lowest perplexity, or None."""
        return min(self.validations, key=lambda v: v[1], default=None)


def parse_training_log(text):
    """A `TrainingLog` of one or more (resumed) `onmt_train` runs' output."""
    log = TrainingLog()
    kept = 0.0  # training time of earlier runs, up to their last checkpoint
    start = last = step = ppl = None
    last_ckpt = 0.0
    for line in text.splitlines():
        match = _STAMP.match(line)
        if not match:
            continue
        stamp = datetime.datetime.fromisoformat(match.group(1)).timestamp()
        message = match.group(2)
        if message.startswith("Start training loop"):
            kept += last_ckpt
            start, last, last_ckpt = stamp, None, 0.0
        elif (found := _STEP.search(message)) and start is not None:
            step = int(found.group(1))
            if last is not None:
                log.examples += int(found.group(2))
                log.seconds += stamp - last
            last = stamp
        elif message.startswith("Validation perplexity:"):
            ppl = float(message.split(":")[1])
            last = None  # the next window holds the validation
        elif message.startswith("Validation accuracy:") and ppl is not None:
            accuracy = float(message.split(":")[1])
            log.validations.append((step, ppl, accuracy, kept + stamp - start))
            ppl = None
        elif message.startswith("Saving checkpoint") and start is not None:
            last_ckpt = stamp - start
        elif "Early Stop!" in message:
            log.stopped = True
    # A later run repeats the steps after its checkpoint: keep the last.
    by_step = {v[0]: v for v in log.validations}
    log.validations = [by_step[s] for s in sorted(by_step)]
    return log


def training_finished(log, config):
    """Whether early stopping (or the step limit) has ended the training."""
    if log.stopped:
        return True
    if not log.validations:
        return False
    last = log.validations[-1][0]
    best = log.best()[0]
    patience = config["early_stopping"] * config["valid_steps"]
    return last - best >= patience or last >= config["train_steps"]
