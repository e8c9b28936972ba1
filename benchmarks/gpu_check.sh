#!/bin/bash
# Every GPU check in one command, on a machine with one CUDA GPU, in this order:
#   1. main_job: the README's main job on CUDA (xnli, asg, quick profile), timed;
#   2. gpu_tier: the gpu test tier (pytest -m gpu: every adapter on CUDA, the kernels against their
#      references, the head's own CUDA graphs, an out-of-vocabulary id, the main job's and the
#      benchmark's smoke runs, tensors staying on the device);
#   3. bench: harness bench --device cuda --random --only heads,decode --rounds 5 (cold and hot rows,
#      the head's own graphs, eager kernels, whole-call graphs, decoding in random order);
#   4. recovery, as time allows: SmolLM2 bpb with ASG and 3,000 recovery steps (quick profile).
# Each step runs under its own limit, cut to what is left of BUDGET_S (default 540 s, so that the
# reinstall and this script fit one 600 s device command); the next step runs whatever the last did.
# Every output goes into one tarball, $OUT/gpu-check.tgz (OUT defaults to /tmp/gpu-check): summary.txt
# (GPU, versions, each step's exit status and seconds; exit 124 = cut at its limit), one log per step,
# bench.json, the recovery run's database. It is written when the script ends, however it ends.
# Usage (the packed machine: docs/performance.md, "On a GPU"; the parts must include me5-small and xnli,
# wikitext2, c4_sample and unimorph for the tier, smollm2 for step 4):
#   bash .gpu/run.sh --reinstall bash "$PWD/benchmarks/gpu_check.sh" "$PWD"
set -u
REPO=${1:?usage: gpu_check.sh PATH_OF_THE_CHECKOUT}
OUT=${OUT:-/tmp/gpu-check}
DEADLINE=$((SECONDS + ${BUDGET_S:-540}))
LOGS=$(mktemp -d)/gpu-check
mkdir -p "$OUT" "$LOGS"
pack() { tar -czf "$OUT/gpu-check.tgz" -C "$(dirname "$LOGS")" gpu-check && echo "outputs: $OUT/gpu-check.tgz"; }
trap pack EXIT

step() {  # step NAME SECONDS COMMAND...: run within its limit and the budget; log to NAME.txt; record status and time
    local name=$1 limit=$2 start=$SECONDS left=$((DEADLINE - SECONDS - 10))
    shift 2
    if [ "$left" -lt 30 ]; then
        echo "$name: not run, ${left} s of the budget left" | tee -a "$LOGS/summary.txt"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $name (limit $limit s): $*"
    timeout "$limit" "$@" > "$LOGS/$name.txt" 2>&1
    local status=$?
    echo "$name: exit $status after $((SECONDS - start)) s (limit $limit s)" | tee -a "$LOGS/summary.txt"
    tail -n 25 "$LOGS/$name.txt"
}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], '| torch', torch.__version__, 'CUDA', torch.version.cuda, '| triton', triton.__version__)"
    python3 -c "from harness.methods import triton_support as t; print('Triton kernels build:', t.available('cuda'), t.failures())"
    git -C "$REPO" rev-parse HEAD 2>/dev/null
} > "$LOGS/summary.txt" 2>&1
cat "$LOGS/summary.txt"

step main_job 110 harness run --suite xnli --adapter asg --device cuda --profile quick --db "$LOGS/main.duckdb"
step gpu_tier 200 python3 -m pytest -m gpu -n 0 -v -p no:cacheprovider --rootdir "$REPO" -c "$REPO/pyproject.toml" \
    "$REPO/tests/test_gpu.py" "$REPO/tests/test_conformance.py" "$REPO/tests/test_triton_kernels.py" \
    "$REPO/tests/test_devices.py" "$REPO/tests/test_model_families.py"  # the files with gpu tests
step bench 160 harness bench --device cuda --random --only heads,decode --rounds 5 --json "$LOGS/bench.json"
step recovery 600 harness run --suite bpb --model smollm2 --adapter asg --device cuda --profile quick --recover 3000 \
    --db "$LOGS/recovery.duckdb"
