#!/usr/bin/env bash
# The GPU check of issue 13 (item 6), prepared once: on a machine with a CUDA device it runs
#   1. the CUDA tests (pytest -m cuda: pair sums, a Langevin step and the float32 p = 64
#      rescaling against the CPU; they are skipped on a machine without CUDA),
#   2. the GPU benchmarks: pair forces side by side (meanfield / previous / plain torch) and the
#      full Langevin step's scaling in N (bench_pairs.py --device cuda), and linear attention
#      against SDPA (bench_attention.py --device cuda),
# in under 8 minutes (each part has its own time limit), writing everything into one folder:
#
#   bash benchmarks/gpu_check.sh [OUTDIR]     # default: $OUT if set, else benchmarks/results/gpu
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
    print("device", torch.cuda.get_device_name(0))
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

part pytest_cuda 150 python -m pytest -q -m cuda -p no:cacheprovider tests/
part bench_pairs_cuda 170 python benchmarks/bench_pairs.py --device cuda \
    --sections pairs,tiles,scaling --no-keops --repeats 7 --tiles 1024,2048,4096,8192 \
    --scaling-N 1000,3000,10000,30000,100000 --out "$OUTDIR/pairs_cuda"
part bench_attention_cuda 120 python benchmarks/bench_attention.py --device cuda \
    --max-len 16384 --json "$OUTDIR/bench_attention_cuda.json"

say "total $(( $(date +%s) - START ))s; results in $OUTDIR"
if [ ${#FAILED[@]} -eq 0 ]; then
    say "summary: every part passed"
    exit 0
fi
say "summary: failed: ${FAILED[*]}"
exit 1
