#!/usr/bin/env bash
# The papers' units (papers/runner.py) on one GPU machine, on JAX.
#
# The machine is held for minutes, so every unit runs at once as its own
# process on the one GPU, all sharing it (no preallocation): the EntNet
# runs are a few small kernels a step, bound by the host's dispatch, not by
# the GPU. Each process stops starting epochs after MAX_MINUTES (default 7)
# and leaves its unit `partial`, to be resumed. Results land in $OUT
# (babi.jsonl, pointer.jsonl, the logs), and the units' checkpoints in
# $OUT/checkpoints-*.tgz, so that a later runner (CPU or GPU) resumes them:
# untar them under papers/output/runs/ and append the result lines to
# papers/results/.
#
# Carried from the workstation (ignored by git): `.whl` (keras, namex and
# optree wheels for Python 3.12; the machine has JAX, numpy, h5py, rich),
# `papers/output/babi_data` (the tasks' files copied from ../shared) and
# `papers/output/gpu_ck` (the cached Held-Karp reference of TSP n = 20).
#
#   MAX_MINUTES=7 KERAS_ATTN_COMMIT=$(git rev-parse HEAD) \
#       bash papers/gpu_runs.sh "16:1 16:2 19:1 19:2 17:1 3:0" \
#       "hull-5-50:0 tsp-5-20:0"
#
# PAD_TO=50 pads every Ptr-Net batch to n = 50: one shape to compile on the
# GPU, where the padded steps cost next to nothing. MAX_EPOCHS=N runs the
# Ptr-Net units past the recipe's 1M examples (N chunks of 20,000).
# DATA_WORKERS=N: processes per Ptr-Net unit that make the coming epochs'
# examples; tsp-5-20-or-opt's labels cost a CPU core about as much as a
# training epoch, far more than a GPU's epoch, so give it several cores.
set -uo pipefail
BABI_UNITS=${1-"16:1 19:1"}
POINTER_UNITS=${2-""}
MAX_MINUTES=${MAX_MINUTES:-7}
OUT=${OUT:-papers/output/gpu_out}
CK=papers/output/gpu_ck
mkdir -p "$OUT" "$CK" /tmp/logs

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" KERAS_BACKEND=jax PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=3
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
lscpu | grep -E '^(Model name|CPU\(s\))'
python3 -c "import jax, keras; print(keras.__version__, jax.devices())" || exit 1

pids=()
for unit in $BABI_UNITS; do
    task=${unit%%:*} seed=${unit##*:}
    python3 -m papers.runner babi --tasks "$task" --seeds "$seed" \
        --max-minutes "$MAX_MINUTES" --slice-epochs 20 --data-dir papers/output/babi_data \
        --checkpoints "$CK" --results "$OUT/babi.jsonl" \
        >"/tmp/logs/babi-$task-$seed.log" 2>&1 &
    pids+=($!)
done
for unit in $POINTER_UNITS; do
    config=${unit%%:*} seed=${unit##*:}
    # One visit (each visit compiles anew), ending with a test decode: leave
    # that a minute and a half.
    python3 -m papers.runner pointer --configs "$config" --seeds "$seed" \
        --max-minutes "$(python3 -c "print(max($MAX_MINUTES - 1.5, 1))")" \
        --checkpoints "$CK" --results "$OUT/pointer.jsonl" ${PAD_TO:+--pad-to "$PAD_TO"} \
        ${MAX_EPOCHS:+--max-epochs "$MAX_EPOCHS"} \
        ${DATA_WORKERS:+--data-workers "$DATA_WORKERS"} \
        >"/tmp/logs/pointer-$config-$seed.log" 2>&1 &
    pids+=($!)
done
# A unit that crashes shows early (bAbI writes a line per 20 epochs); the
# call still waits for the others.
sleep 90
for log in /tmp/logs/*.log; do
    echo "== $log (after 90 s)"
    grep -v -E '^(I0000|W0000|WARNING: All)' "$log" | tail -n 3
done
wait "${pids[@]}"
for log in /tmp/logs/*.log; do
    echo "== $log"
    grep -v -E '^(I0000|W0000|WARNING: All)' "$log" | tail -n 20
done >"$OUT/logs.txt"
cat "$OUT/logs.txt"
tar -C "$CK" -czf "$OUT/checkpoints-babi.tgz" babi 2>/dev/null
for dir in "$CK"/pointer/*; do
    [[ -d "$dir" ]] && tar -C "$CK" -czf "$OUT/checkpoints-$(basename "$dir").tgz" \
        "pointer/$(basename "$dir")"
done
ls -la "$OUT"
