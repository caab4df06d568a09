#!/usr/bin/env bash
# One call on a GPU machine does every check and benchmark that needs the GPU:
#   full-size CUDA forward checks, the forward benchmark (with torch.func.vmap beside it where
#   torch is installed), and the pipeline benchmark (emulator limit, overlap, lockstep, plain).
# Logs go to $OUT (or ./gpu_logs). Wheels for packages the GPU image lacks (ale-py, gymnasium,
# farama-notifications) may be carried in .whl/ (see the device README); they are installed first.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-gpu_logs}"
mkdir -p "$out"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc; date -u; git rev-parse HEAD; } 2>&1 | tee "$out/machine.txt"
python3 -m tests.cuda_checks --full 2>&1 | tee "$out/cuda_checks.log"
python3 -m experiments.bench_forward --device cuda 2>&1 | tee "$out/bench_forward.log"
python3 -m experiments.bench_pipeline --nets large small --populations 256 1000 --frame-cap 5000 2>&1 | tee "$out/bench_pipeline.log"
# The ES update on 16 cores beside a generation at ~150K frames/s (the emulator limit of a 16-core
# box, at ~13K preprocessed frames/s per core; compare with the pipeline figure above).
python3 -m experiments.bench_algos --frames-per-s 150000 2>&1 | tee "$out/bench_algos.log"
