"""The members trained on JAX over several devices and hosts: Keras'
`DataParallel` over every device the processes see.

One process per host (`--num-processes`, `--process-id`, `--coordinator`,
or Keras' `KERAS_DISTRIBUTION_*` variables) joins the others through
`keras.distribution.initialize` (`jax.distributed.initialize`, before
anything touches a device); on CPU the hosts' collectives are gloo's. When
more than one device is seen, `keras.distribution.DataParallel` over all
of them is set before the model is built: every variable is replicated,
and every batch is split by rows over the devices. The global batch stays
`--batch-size` and the schedule is the same as on one device: each process
reads its own rows of every global batch (`ArrayBatches`' `shard`), which
the JAX trainer assembles into the global batch
(`jax.make_array_from_process_local_data`). Process 0 keeps the run folder;
the others train in step in a scratch copy of it (`worker_run_dir`), where
they save what process 0 saves (a save gathers the weights: every process
takes part).
"""

import os
import shutil
import tempfile
from pathlib import Path

import keras

from models.settings.errors import UserError
from models.settings.folder_layout import LOGS_DIR, PREPARED_DIR

# Keras' variables for the processes of a multi-host run.
PROCESS_VARIABLES = (
    "KERAS_DISTRIBUTION_JOB_ADDRESSES",
    "KERAS_DISTRIBUTION_NUM_PROCESSES",
    "KERAS_DISTRIBUTION_PROCESS_ID",
)


def start_processes(coordinator=None, num_processes=None, process_id=None):
    """Joins this process to a multi-host run, if flags or Keras' variables
    name one; returns whether they do.

    Args:
        coordinator: `"host:port"` of process 0's coordinator.
        num_processes: Python int, the processes of the run (one a host).
        process_id: Python int, this process's index, from 0.
    """
    given = (coordinator, num_processes, process_id)
    if all(v is None for v in given):
        if not any(name in os.environ for name in PROCESS_VARIABLES):
            return False
    elif any(v is None for v in given):
        raise UserError(
            "A multi-host run needs all of --coordinator, --num-processes and "
            f"--process-id. Received: coordinator={coordinator}, "
            f"num_processes={num_processes}, process_id={process_id}"
        )
    import jax

    # The CPU backend's collectives across processes (GPUs have their own).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    keras.distribution.initialize(coordinator, num_processes, process_id)
    return True


def data_parallel(batch_size):
    """Sets `keras.distribution.DataParallel` over every device when there
    are several; returns `(process_index, process_count)`, this process's
    shard of each global batch.

    Raises:
        UserError: `batch_size` does not divide over the devices.
    """
    devices = keras.distribution.list_devices()
    if len(devices) > 1:
        if batch_size % len(devices):
            raise UserError(
                f"`--batch-size` must divide over the {len(devices)} devices "
                "(each takes an equal share of every batch). "
                f"Received: batch_size={batch_size}"
            )
        # Not Keras' sharding, which takes a `tf.data.Dataset` only: each
        # process's `ArrayBatches` reads its own rows.
        keras.distribution.set_distribution(
            keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False)
        )
    import jax

    return jax.process_index(), jax.process_count()


def worker_run_dir(run_dir, cleanup):
    """Where a process other than process 0 keeps its copy of the run: a
    scratch copy of the run folder (its backups, so that every process
    resumes from process 0's), removed when `cleanup` closes.

    Args:
        run_dir: The run folder that process 0 keeps.
        cleanup: A `contextlib.ExitStack`.
    """
    scratch = Path(cleanup.enter_context(tempfile.TemporaryDirectory()))
    shutil.copytree(
        run_dir, scratch / "run", ignore=shutil.ignore_patterns(PREPARED_DIR, LOGS_DIR)
    )
    return scratch / "run"


def run_folder(run_dir, process_index, cleanup):
    """The run folder this process writes: `run_dir` for process 0, else a
    `worker_run_dir` (removed when `cleanup`, an `ExitStack`, closes)."""
    if process_index == 0:
        return Path(run_dir)
    return worker_run_dir(run_dir, cleanup)
