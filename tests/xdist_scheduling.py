"""The order in which pytest-xdist's `loadfile` hands out the test files.

pytest-xdist's `loadfile` hands out the files with the most tests first,
which leaves the few-test end-to-end files (a minute each on TensorFlow,
the forecast's on JAX) for the end, one worker running them while the
other idles. Started first, they run beside the many small files.

Imported by conftest.py's `pytest_xdist_make_scheduler` hook only, which
pytest calls only where pytest-xdist is installed.
"""

from xdist.scheduler import LoadFileScheduling

HEAVIEST_FILES = (
    "tests/test_pipeline.py",  # builds the shared trained run
    "tests/test_multi_worker.py",  # needs no shared run: runs while it trains
    "tests/test_training_faults.py",
    "tests/test_export_faults.py",
    "tests/test_server_faults.py",
    "tests/test_flags.py",
    "tests/test_own_data.py",
    "tests/test_distill.py",  # a train.py run among quick tests
    "tests/test_decoding_levers.py",  # XLA compilations
    "tests/test_forecast.py",
)


class HeaviestFilesFirst(LoadFileScheduling):
    """`loadfile` scheduling that hands out `HEAVIEST_FILES` first, in order."""

    def _assign_work_unit(self, node):
        for scope in reversed(HEAVIEST_FILES):
            if scope in self.workqueue:
                self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)
