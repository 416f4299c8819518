"""Where a `train.py` command is: a line per stage, and the time left.

Keras' bar shows the current epoch; these lines show the whole command:
the data, each member's epochs with its best validation score, tuning,
export and evaluation, each with the time spent and an estimate of what is
left of the command. The estimate assumes every member trains as many
epochs as the finished ones did (at least until its patience would end it)
and that each epoch takes as long as the ones measured so far.
"""

import dataclasses
import os
import platform
import sys
import time

# Tuning, export and evaluation after training, in epochs of training time:
# they decode the validation and test documents with the ensemble, whose
# cost grows with the model as an epoch's does.
AFTER_TRAINING_EPOCHS = 6


def _minutes(seconds):
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


@dataclasses.dataclass
class _Member:
    epochs: int = 0  # trained in all, resumed ones included
    seconds: float = 0.0  # this command's time on it
    epochs_here: int = 0  # trained by this command


class CommandProgress:
    """Prints one line per stage and per epoch to `stream`, with an ETA.

    Args:
        members: the ensemble's size.
        max_epochs: a member's epoch limit.
        patience: epochs without improvement before early stopping.
        stream: where the lines go (stderr).
    """

    def __init__(self, members, max_epochs, patience, stream=None):
        self.members = members
        self.max_epochs = max_epochs
        self.patience = patience
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.stage_seconds = {}
        self._stage = None
        self._stage_start = None
        self._member = {}
        self._finished_epochs = []

    def stage(self, name, detail=""):
        """Starts stage `name` (ending the previous one) and says so."""
        self._end_stage()
        self._stage, self._stage_start = name, time.monotonic()
        self._print(f"{name}{': ' + detail if detail else ''}")

    def _end_stage(self):
        if self._stage is not None:
            spent = time.monotonic() - self._stage_start
            self.stage_seconds[self._stage] = (
                self.stage_seconds.get(self._stage, 0.0) + spent
            )
        self._stage = None

    def finish(self):
        """Ends the last stage; returns `{stage: seconds}`."""
        self._end_stage()
        return {k: round(v, 1) for k, v in self.stage_seconds.items()}

    def member_done(self, k, epochs):
        """Member `k` (from 0) finished after `epochs` epochs."""
        self._finished_epochs.append(epochs)
        self._member.setdefault(k, _Member()).epochs = epochs

    def epoch_end(self, k, epoch, seconds, score, best, best_epoch, monitor):
        """Member `k` ended epoch `epoch` (from 1) in `seconds`."""
        member = self._member.setdefault(k, _Member())
        member.epochs, member.seconds = epoch, member.seconds + seconds
        member.epochs_here += 1
        name = "ROUGE-1" if monitor == "val_rouge1" else "loss"
        best_text = (
            f", best {best:.2f} at epoch {best_epoch}" if best is not None else ""
        )
        self._print(
            f"member {k + 1}/{self.members}, epoch {epoch}/{self.max_epochs}: "
            f"validation {name} {score:.2f}{best_text}; {self._eta(k, best_epoch)}"
        )

    def _epoch_seconds(self):
        spent = [m for m in self._member.values() if m.epochs_here]
        if not spent:
            return None
        return sum(m.seconds for m in spent) / sum(m.epochs_here for m in spent)

    def _eta(self, k, best_epoch):
        per_epoch = self._epoch_seconds()
        elapsed = time.monotonic() - self.start
        if per_epoch is None:
            return f"{_minutes(elapsed)} elapsed"
        current = self._member[k].epochs
        # The earliest this member can stop: its patience after its best.
        earliest = min(self.max_epochs, max(current, (best_epoch or 0) + self.patience))
        typical = (
            round(sum(self._finished_epochs) / len(self._finished_epochs))
            if self._finished_epochs
            else earliest
        )
        epochs_left = max(earliest, typical) - current
        epochs_left += (self.members - k - 1) * typical
        left = per_epoch * (epochs_left + AFTER_TRAINING_EPOCHS)
        most = per_epoch * (self._max_epochs_left(k) + AFTER_TRAINING_EPOCHS)
        return (
            f"{_minutes(elapsed)} elapsed, about {_minutes(left)} left "
            f"(at most {_minutes(most)})"
        )

    def _max_epochs_left(self, k):
        current = self._member[k].epochs
        return self.max_epochs - current + (self.members - k - 1) * self.max_epochs

    def _print(self, line):
        print(f"[train.py] {line}", file=self.stream, flush=True)


def machine():
    """The machine a run ran on: CPU model, cores and SIMD flags."""
    fields = _cpuinfo()
    flags = set(fields.get("flags", "").split())
    return {
        "cpu": fields.get("model name") or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "cpu_flags": [
            f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if f in flags
        ],
    }


def _cpuinfo():
    """The first processor's `/proc/cpuinfo` fields (none off Linux)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields
