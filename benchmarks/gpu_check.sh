#!/bin/bash
# The GPU checks of issues 41 and 43 in one command, on a machine with one CUDA GPU, in this order:
#   1. the README's main job on CUDA (quick profile), timed;
#   2. the gpu test tier (pytest -m gpu: every adapter on CUDA, the kernels against their references,
#      the main job's smoke run, the benchmark's smoke run, tensors staying on the device);
#   3. harness bench --device cuda --random --only heads,decode --rounds 5 (eager and CUDA-graph rows).
# Each step runs under its own time limit (510 s in all, so the install and the checks fit one 600 s
# device command) and the next runs whatever the last did; every figure goes to $OUT (default
# /tmp/gpu-check), a test per line, so a step cut short still says what passed.
# Usage (the packed machine: docs/performance.md, "On a GPU"):
#   bash .gpu/run.sh --reinstall bash "$PWD/benchmarks/gpu_check.sh" "$PWD"
set -u
REPO=${1:?usage: gpu_check.sh PATH_OF_THE_CHECKOUT}
OUT=${OUT:-/tmp/gpu-check}
WORK=$(mktemp -d)
mkdir -p "$OUT"

step() {  # step NAME SECONDS COMMAND...: run, keep its output in $OUT/NAME.txt, record its status and time
    local name=$1 limit=$2 start=$SECONDS
    shift 2
    echo "== $name: $*"
    timeout "$limit" "$@" > "$OUT/$name.txt" 2>&1
    local status=$?
    echo "$name: exit $status after $((SECONDS - start)) s" | tee -a "$OUT/summary.txt"
    tail -n 25 "$OUT/$name.txt"
}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], '| torch', torch.__version__, 'CUDA', torch.version.cuda, '| triton', triton.__version__)"
} > "$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"

step main_job 120 harness run --suite xnli --adapter asg --device cuda --profile quick --db "$WORK/gpu.duckdb"
step gpu_tier 240 python3 -m pytest -m gpu -n 0 -v -p no:cacheprovider --rootdir "$REPO" -c "$REPO/pyproject.toml" \
    "$REPO/tests/test_gpu.py" "$REPO/tests/test_conformance.py" "$REPO/tests/test_triton_kernels.py"  # the files with gpu tests
step bench 150 harness bench --device cuda --random --only heads,decode --rounds 5 --json "$OUT/bench.json"
rm -rf "$WORK"
