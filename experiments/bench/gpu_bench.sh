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
#                                                   # cores' emulator roof and the pool's limits, then on 256
#                                                   # and 1,000 slots, with 4 units a process and with the
#                                                   # pool spinning, the pool's
#                                                   # sizes, the 16 cores alone (workers); each step's log
#                                                   # in $OUT/lease_logs.tgz, the exit codes last
#   bash experiments/bench/gpu_bench.sh lease2     # the lease's second call (~4 minutes): the CUDA checks the
#                                                   # first leaves out, the convs' output pixels a thread, the
#                                                   # GPU's fp32 peak and memory read
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
  # stop the rest; a step with under 20 seconds left is skipped. Each log line starts with the
  # seconds since its step began (where a step's time goes). The logs are packed into
  # $out/lease_logs.tgz at the end: the device tool brings back 8 files at most.
  codes=()
  deadline=${LEASE_SECONDS:-540}  # (bash's SECONDS count from the script's start: the wheels' install too)
  rm -rf "$out/steps" && mkdir -p "$out/steps"  # (no stale logs of an earlier call in the archive)
  stamp() { local t0=$SECONDS line; while IFS= read -r line || [[ -n $line ]]; do printf '%4d s  %s\n' $((SECONDS - t0)) "$line"; done; }
  try() {  # try NAME LIMIT COMMAND...
    local name=$1 cut=$2; shift 2
    local left=$((deadline - SECONDS))
    if ((left < 20)); then codes+=("$name=skipped"); echo "== $name: skipped (${left} s left)"; return; fi
    ((cut > left)) && cut=$left
    echo "== $name (cut at ${cut} s): $*"
    local t0=$SECONDS
    local rc=0
    # (stamped in a process substitution, not a pipe: a killed step's emulator processes that
    # still hold its output do not hold up the next step)
    timeout -s KILL "$cut" "$@" > >(exec >"$out/steps/$name.log" 2>&1; stamp) 2>&1 || rc=$?
    sleep 0.2  # (the last lines stamped)
    cat "$out/steps/$name.log"
    codes+=("$name=$rc ($((SECONDS - t0)) s)")
  }
  pack() {
    echo "== exit codes: ${codes[*]}" | tee "$out/steps/exit_codes.txt"
    cp "$out/machine.txt" "$out/steps/" 2>/dev/null || true
    tar czf "$out/lease_logs.tgz" -C "$out" steps && rm -rf "$out/steps"
  }
  # the 14 CUDA checks that the lease of 2026-12-04 had no time for (its first six passed)
  LATE_CHECKS=(conv_pixels_per_thread_give_the_same_outputs gathered_rows_match_given_rows
    steps_in_flight_keep_their_own_actions pipeline_with_steps_in_flight_plays_the_synchronous_episodes
    continuous_actions_match_reference evaluator_builds_its_rows_on_the_device float32_vectors_match_reference
    policy_reuses_buffers load_reuses_weight_memory rows_do_not_interact zero_rows_and_ties
    module_forward_has_reference_signature resolve_device_picks_cpu_under_the_simulator memory_error_is_clear)
  E2E=(python3 -m experiments.roofline --e2e-only --nets large --rows 64 --max-gb 1 --weights fp16
    --e2e-device cuda --population 1000 --limit-seconds 2)
  if [[ $part == lease2 ]]; then
    # The second call of a lease, on the warm machine (~4 minutes): the CUDA checks the first call
    # leaves out, the conv kernels' output pixels a thread, then the GPU's own roof
    try cuda_checks 120 python3 -m tests.cuda_checks --only "${LATE_CHECKS[@]}"
    try conv_px 70 python3 -m experiments.bench.bench_forward --device cuda --seconds 0.3 --rows 1000 \
      --weights fp16 --conv-px 4 8 --no-torch
    try gpu_roof 40 python3 -c "from nevo.roofline import gpu as r
print(f'GPU streaming read {r.gpu_bandwidth(2**31, 5) / 1e12:.2f} TB/s, fp32 FMA peak {r.gpu_peak(0.5) / 1e12:.1f} TFLOP/s')"
    pack
    exit 0
  fi
  try smoke 60 python3 -c "$DETECT; $TINY_KERNEL"
  # First, a GPU generation on the emulator pool's 16 cores: a population-1,000 generation of
  # large on Frostbite in the default layout (512 slots, 4 groups of 128, overlap, a batch sent as
  # soon as the GPU is done with it), beside the 16 cores' emulator roof and the pool's own
  # limits, lockstep and first-ready. Asked: >= 85% of the roof and >= 85K frames/s. The lease of 2026-12-04: 65,653 frames/s, 70% of the roof
  # 93,166, 88% of the pool's lockstep limit; its sweep had the first-ready pool at 89% of the
  # roof on 512 slots and 97% on 256, and a stand-in policy 1.08x faster with the pool spinning.
  try e2e 170 "${E2E[@]}" --slots 512
  # The same generation on 256 slots (16 a process, groups of 64: the pool nearer its roof, the
  # forward on fewer rows a call); on 512 with 4 units a process (a process idles only when all
  # four wait for their batch, against both of two); on 512 with the pool spinning 50 us
  try e2e_256 100 "${E2E[@]}" --slots 256
  try e2e_units4 100 "${E2E[@]}" --slots 512 --units-per-process 4
  try e2e_spin 100 "${E2E[@]}" --slots 512 --spin-us 50
  # Every individual in a slot at once (1,000 slots, 4 groups of 250): one wave of episodes, more
  # rows a forward (sessions 26 and 55: cut, with the whole forward table before it, before it
  # printed its line)
  try e2e_1000 100 "${E2E[@]}" --slots 1000
  # The pool's sizes, its lockstep and first-ready units, in 16 and 15 processes (CPU only;
  # 2026-12-04: first-ready 97% of the roof on 256 slots, 89% on 512, lockstep 71-75%)
  try pool_sweep 150 python3 -m experiments.bench.bench_pipeline --pool-sweep --limit-seconds 2
  # The 16 cores alone, no GPU: the CPU's "workers" pipeline, against session 23's 18,384
  # frames/s (lockstep, ale-py's vector env)
  try e2e_cpu 150 python3 -m experiments.roofline --e2e-only --nets large --rows 64 --max-gb 1 \
    --weights fp16 --e2e-device cpu --population 256 --limit-seconds 2
  pack
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
