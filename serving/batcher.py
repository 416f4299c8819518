"""Merges requests that arrive within a few milliseconds into one model call."""

import concurrent.futures
import logging
import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from serving.servable import Servable

logger = logging.getLogger("serving")


@dataclass
class Job:
    servable: Servable
    signature: str
    inputs: dict[str, list]
    size: int
    # Scalar inputs (the length settings): one value for all the job's rows,
    # so only jobs with equal params share a batch.
    params: dict[str, Any] = field(default_factory=dict)
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)

    @property
    def key(self):
        return id(self.servable), self.signature, tuple(sorted(self.params.items()))


_STOP = object()


class Batcher:
    """Merges requests that arrive close together into one signature call.

    A single worker thread owns every model call. It blocks for a first job, then
    keeps collecting jobs for up to `timeout_s` or until `max_batch_size`
    instances are waiting, groups them by (servable, signature, params), and runs each
    group as one batch. The queue is bounded so overload is answered at once
    (503) instead of growing latency without limit.
    """

    def __init__(self, max_batch_size, timeout_s, max_queue):
        self.max_batch_size = max_batch_size
        self.timeout_s = timeout_s
        self._queue = queue.Queue(maxsize=max_queue)
        self._thread = None
        self._lock = threading.Lock()
        self.batches = 0
        self.instances = 0
        self.jobs = 0
        self.max_batch_seen = 0
        self.multi_job_batches = 0
        self.batch_sizes = Counter()

    def start(self):
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="batcher", daemon=True
            )
            self._thread.start()

    def stop(self):
        if self._thread is not None:
            try:  # Jobs queued ahead of the sentinel still get their answers.
                self._queue.put(_STOP, timeout=30)
            except queue.Full:
                logger.error("Batcher queue stayed full; worker not stopped cleanly")
            self._thread.join(timeout=30)
            self._thread = None

    def submit(self, job):
        """Queues `job`; raises `queue.Full` when the queue is at capacity."""
        self._queue.put_nowait(job)

    @property
    def queue_depth(self):
        return self._queue.qsize()

    def stats(self):
        with self._lock:
            return {
                "batches": self.batches,
                "jobs": self.jobs,
                "instances": self.instances,
                "max_batch_size_seen": self.max_batch_seen,
                "multi_request_batches": self.multi_job_batches,
                "batch_size_histogram": {
                    str(k): v for k, v in sorted(self.batch_sizes.items())
                },
                "queue_depth": self.queue_depth,
            }

    def _collect(self, first):
        jobs, size = [first], first.size
        deadline = time.monotonic() + self.timeout_s
        while size < self.max_batch_size:
            remaining = deadline - time.monotonic()
            try:
                job = (
                    self._queue.get(timeout=remaining)
                    if remaining > 0
                    else self._queue.get_nowait()
                )
            except queue.Empty:
                break
            if job is _STOP:
                return jobs, True
            jobs.append(job)
            size += job.size
        return jobs, False

    def _run(self):
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            jobs, stop = self._collect(first)
            groups = {}
            for job in jobs:
                groups.setdefault(job.key, []).append(job)
            for group in groups.values():
                for chunk in self._chunks(group):
                    self._run_chunk(chunk)
            if stop:
                return

    def _chunks(self, jobs):
        chunk, size = [], 0
        for job in jobs:
            if chunk and size + job.size > self.max_batch_size:
                yield chunk
                chunk, size = [], 0
            chunk.append(job)
            size += job.size
        if chunk:
            yield chunk

    def _run_chunk(self, jobs):
        # Jobs whose client already timed out are dropped before any work.
        jobs = [j for j in jobs if j.future.set_running_or_notify_cancel()]
        if not jobs:
            return
        try:
            self._run_batch(jobs)
        except Exception as exc:
            if len(jobs) == 1:
                jobs[0].future.set_exception(exc)
                return
            # One bad request must not fail its batch-mates: retry one by one.
            for job in jobs:
                try:
                    self._run_batch([job])
                except Exception as single_exc:
                    job.future.set_exception(single_exc)

    def _run_batch(self, jobs):
        servable, signature = jobs[0].servable, jobs[0].signature
        merged = {name: [] for name in jobs[0].inputs}
        for job in jobs:
            for name, values in job.inputs.items():
                merged[name].extend(values)
        total = sum(job.size for job in jobs)
        # A request may hold more instances than a batch: it runs in slices.
        slices = [
            {k: v[start : start + self.max_batch_size] for k, v in merged.items()}
            for start in range(0, total, self.max_batch_size)
        ]
        parts = [servable.run(signature, {**s, **jobs[0].params}) for s in slices]
        outputs = {name: _concatenate([p[name] for p in parts]) for name in parts[0]}
        with self._lock:
            self.batches += len(slices)
            self.jobs += len(jobs)
            self.instances += total
            self.multi_job_batches += len(jobs) > 1
            for part in slices:
                size = len(next(iter(part.values())))
                self.max_batch_seen = max(self.max_batch_seen, size)
                self.batch_sizes[size] += 1
        start = 0
        for job in jobs:
            end = start + job.size
            part = {}
            for name, value in outputs.items():
                batched = value.ndim > 0 and value.shape[0] == total
                part[name] = value[start:end] if batched else value
            job.future.set_result((part, len(jobs), min(total, self.max_batch_size)))
            start = end


def _concatenate(values):
    """One output of several slices' runs, rows padded to the widest slice
    (an empty string or 0, as the model pads a batch's shorter rows)."""
    if len(values) == 1 or values[0].ndim == 0:
        return values[0]
    widest = np.max([v.shape for v in values], axis=0)
    padded = []
    for value in values:
        pad = [(0, 0)] + [
            (0, w - n) for w, n in zip(widest[1:], value.shape[1:], strict=True)
        ]
        fill = b"" if value.dtype == object else 0
        padded.append(np.pad(value, pad, constant_values=fill))
    return np.concatenate(padded)
