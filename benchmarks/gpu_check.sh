#!/usr/bin/env bash
# The GPU check, prepared once, for a machine with a CUDA device. By default (under 3 minutes
# on an H200; each part has its own time limit, 170 s in all) it runs
#   1. the CUDA tests (pytest -m cuda: pair sums, a Langevin step and the float32 p = 64
#      rescaling against the CPU; kernel attention on CUDA against the CPU under torch's sync
#      debug mode "error" -- no host synchronisation in the causal or bidirectional path -- and
#      the causal path under dynamo without graph breaks; a tiny pretrained-study run with
#      --device cuda, needing the [hf] extra; all skipped without CUDA),
#   2. the causal path against causal SDPA at L = 1k ... 64k (issues 20, 23): bench_attention.py
#      --section scan in bfloat16 inputs, so that SDPA takes its flash kernel (kernel attention
#      accumulates in float32 whatever the input dtype), m = 64, d_h = 64, 4 heads: the prefix
#      states by the per-chunk loop, by the batched scans (the default on an accelerator) with
#      the device-side underflow repair, and SDPA, with the paired ratios t / t_SDPA and the
#      crossover L,
#   3. the bidirectional guard section (float32, L = 256 ... 8192): kernel_attention against a
#      plain ten-line FAVOR+ and the previous code path;
# with GPU_CHECK_ALL=1 also issue 13's parts (about 5 more minutes): the pair-force benchmarks
# (bench_pairs.py --device cuda) and every feature map against SDPA (bench_attention.py).
# Everything is written into one folder:
#
#   bash benchmarks/gpu_check.sh [OUTDIR]     # default: $OUT if set, else benchmarks/results/gpu
#   GPU_CHECK_ALL=1 bash benchmarks/gpu_check.sh [OUTDIR]
#
# Exit status: 0 when every part passed, 3 without a CUDA device, 1 when some part failed
# (the summary at the end of OUTDIR/gpu_check.log names it).
set -u
cd "$(dirname "$0")/.."
OUTDIR=${1:-${OUT:-benchmarks/results/gpu}}
mkdir -p "$OUTDIR"
LOG="$OUTDIR/gpu_check.log"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
START=$(date +%s)
: > "$LOG"
say() { echo "$*" | tee -a "$LOG"; }

say "gpu_check.sh $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee -a "$LOG"
python - <<'PY' 2>&1 | tee -a "$LOG"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    print("device", torch.cuda.get_device_name(0), "flash SDPA enabled",
          torch.backends.cuda.flash_sdp_enabled())
PY
if ! python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    say "no CUDA device visible to torch: nothing to check"
    exit 3
fi

FAILED=()
part() {  # part NAME SECONDS COMMAND...
    local name=$1 limit=$2
    shift 2
    local t0=$(date +%s)
    say "--- $name (limit ${limit}s): $*"
    timeout "$limit" "$@" > "$OUTDIR/$name.txt" 2>&1
    local rc=$?
    tail -n 40 "$OUTDIR/$name.txt" >> "$LOG"
    say "--- $name: exit $rc after $(( $(date +%s) - t0 ))s"
    [ "$rc" -eq 0 ] || FAILED+=("$name(exit $rc)")
}

# the files that hold CUDA-marked tests (collecting the whole suite would take a minute)
CUDA_TESTS=$(grep -l "mark.cuda" tests/test_*.py)
part pytest_cuda 80 python -m pytest -q -m cuda -p no:cacheprovider $CUDA_TESTS
part attention_causal_cuda 60 python benchmarks/bench_attention.py --device cuda \
    --section scan --dtype bfloat16 --features 64 --min-len 1024 --max-len 65536 --repeats 5 \
    --json "$OUTDIR/bench_attention_scan_cuda.json"
part attention_guards_cuda 30 python benchmarks/bench_attention.py --device cuda \
    --section guards --features 64,128 --max-len 8192 --repeats 7 \
    --json "$OUTDIR/bench_attention_guards_cuda.json"
if [ "${GPU_CHECK_ALL:-0}" = 1 ]; then
    part bench_pairs_cuda 170 python benchmarks/bench_pairs.py --device cuda \
        --sections pairs,tiles,scaling --no-keops --repeats 7 --tiles 1024,2048,4096,8192 \
        --scaling-N 1000,3000,10000,30000,100000 --out "$OUTDIR" --name pairs_cuda
    part bench_attention_cuda 120 python benchmarks/bench_attention.py --device cuda \
        --max-len 16384 --json "$OUTDIR/bench_attention_cuda.json"
fi

say "total $(( $(date +%s) - START ))s; results in $OUTDIR"
if [ ${#FAILED[@]} -eq 0 ]; then
    say "summary: every part passed"
    exit 0
fi
say "summary: failed: ${FAILED[*]}"
exit 1
