"""What the GPU will run, checked without a GPU: every CUDA kernel nevo launches, compiled to
machine code, with its resources and launch limits.

    python -m experiments.bench.kernel_report                 # sm_90 (H100, H200) and sm_80 (A100)
    python -m experiments.bench.kernel_report --arch sm_90

For every net a run can build (large and small on Atari's 18 actions and the maze's 5, the mlp
and the deep net on a vector task, the two MNIST nets with their max-pools), the kernels of
nevo.nets.kernels.cuda are compiled as CudaPolicy launches them: numba.cuda's NVVM turns each
into PTX (`cuda.compile_ptx`), and ptxas into the architecture's machine code, whose report
gives registers, shared memory, stack and spills.
From the PTX: fp64 instructions and divisions. From the machine code (SASS, disassembled by
nvdisasm): the hot loop, the innermost loop with the most FFMA instructions, its instruction
count and its instructions per FFMA (how much of the work around each multiply-add is
overhead). The launch limits are checked for every row count up to 10,000: threads per block,
registers x threads per block, shared memory, the grid's y dimension. A kernel fails on any
spill, local memory (stack), fp64 instruction or exceeded limit, and the kernel that builds
individuals on the GPU on any fused multiply-add (its rows must equal the CPU's bit for bit);
the script exits 1 if one does (tests/test_kernel_report.py runs it in CI).

Needs NVVM and NVRTC (numba.cuda finds them; requirements.txt installs NVRTC), `ptxas` of the
same CUDA version (on PATH, or --ptxas) and nvdisasm (requirements.txt installs its 4 MB wheel).
No GPU and no driver are needed.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

# The nets a run can build: (layers, obs shape, actions, obs dtype, weights' dtype: --weights).
NETS = {
    "large, Atari": ("large", (4, 84, 84), 18, np.uint8, np.float32),
    "small, Atari": ("small", (4, 84, 84), 18, np.uint8, np.float32),
    "large, maze": ("large", (4, 84, 84), 5, np.uint8, np.float32),
    "small, maze": ("small", (4, 84, 84), 5, np.uint8, np.float32),
    "mlp, vector task": ("mlp", (8, 1, 1), 4, np.float32, np.float32),
    "deep, vector task": ("deep", (8, 1, 1), 4, np.float32, np.float32),
    "mlp-tanh, MuJoCo": ("mlp-tanh", (376, 1, 1), 17, np.float32, np.float32),  # Humanoid-v5: 376 in, 17 out
    "mnist, MNIST": ("mnist", (1, 28, 28), 10, np.uint8, np.float32),  # 28x28 digits, 10 classes
    "mnist-large, MNIST": ("mnist-large", (1, 28, 28), 10, np.uint8, np.float32),
    # 16-bit weight rows: the same kernels reading halves (each widened as it is loaded)
    "large, Atari, fp16": ("large", (4, 84, 84), 18, np.uint8, np.float16),
    "small, Atari, fp16": ("small", (4, 84, 84), 18, np.uint8, np.float16),
    "mlp-tanh, MuJoCo, fp16": ("mlp-tanh", (376, 1, 1), 17, np.float32, np.float16),
}
MAX_ROWS = 10_000  # populations and slot counts checked up to this many rows
# The first conv's hot loop on sm_90 before it summed raw pixels in a shared-memory window
# (commit 885a3d8 and earlier): instructions per multiply-add of the loop, whose FFMAs then
# included those of 16 IEEE divisions by 255 per tap (large: 1,109 instructions for 32
# multiply-adds; small: 1,101 for 16). Issue 16's goal: at least 5x fewer.
FIRST_CONV_BEFORE = {"large, Atari": 1109 / 32, "small, Atari": 1101 / 16}
# Per-block limits of compute capabilities 8.x and 9.0 (CUDA C++ Programming Guide, Table 21).
MAX_THREADS, MAX_REGS_PER_BLOCK, MAX_STATIC_SMEM, MAX_GRID_Y = 1024, 65536, 48 * 1024, 65535


@dataclass
class Kernel:
    """One kernel as CudaPolicy launches it: its dispatcher, argument types, threads per block,
    and its grid's y dimension at MAX_ROWS rows (1 where the grid has none)."""

    net: str
    name: str
    dispatcher: object
    argtypes: tuple
    threads: int
    grid_y: int
    unfused: bool = False  # its sums must match the CPU's bit for bit: no FFMA anywhere


def kernels(net: str) -> list[Kernel]:
    """The kernels CudaPolicy._build makes for this net, with the types CudaPolicy.launch passes."""
    import numba
    from numba import types

    from nevo import nets
    from nevo.nets.kernels import cuda as ck

    layers, obs_shape, n_actions, obs_dtype, w_dtype = NETS[net]
    spec = nets.net_spec(layers, obs_shape, n_actions, obs_dtype)
    f32 = types.float32
    obs = types.Array(types.uint8 if obs_dtype == np.uint8 else f32, 4, "C")  # (rows, C, H, W)
    w = types.Array(types.float16 if w_dtype == np.float16 else f32, 2, "C")
    idx = types.Array(types.int32, 1, "C")
    act2, act3, act4 = (types.Array(f32, d, "C") for d in (2, 3, 4))
    out, src, flat = [], obs, obs
    for i, lay in enumerate(spec.layers):
        div = spec.obs_div if i == 0 else None
        act = nets.ACT_CODES[lay.act]
        if lay.kind == "conv":
            (ih, iw), (oh, ow), (pt, _, pl, _) = lay.in_hw, lay.out_hw, lay.pad
            geom = (lay.kernel, lay.kernel, lay.stride, lay.cin, lay.cout, ih, iw, oh, ow, pt, pl)
            k, _, block = ck.conv_kernel(*geom, lay.w_offset, lay.b_offset, act, div)
            out.append(Kernel(net, f"conv{i + 1}", k, (src, act4, w, idx), block[0] * block[1], MAX_ROWS))
            src, flat = act4, act2
        elif lay.kind == "pool":
            (ih, iw), (oh, ow), (pt, _, pl, _) = lay.in_hw, lay.out_hw, lay.pad
            k, _, threads = ck.pool_kernel(lay.kernel, lay.stride, lay.cin, ih, iw, oh, ow, pt, pl)
            out.append(Kernel(net, f"pool{i + 1}", k, (act4, act4), threads, MAX_ROWS))
            src, flat = act4, act2
        elif i == len(spec.layers) - 1:
            k, block = ck.output_kernel(lay.cin, lay.cout, lay.w_offset, lay.b_offset, act, div)
            out.append(Kernel(net, "output", k, (flat, act2, idx, w, idx), block[0] * block[1], 1))
        else:
            size = np.dtype(w_dtype).itemsize
            per_word, halves = ck.dense_loads(lay, size)  # as CudaPolicy reads rows padded on the device
            dense, n_chunks, threads = ck.dense_kernel(lay.cin, lay.cout, lay.w_offset, div, per_word, halves)
            finish, f_threads = ck.dense_finish_kernel(lay.cout, lay.b_offset, act, n_chunks)
            words = (
                w
                if per_word == 1
                else types.Array(numba.from_dtype(np.dtype(ck.WORDS[size, size * per_word])), 2, "C")
            )
            args = (flat, act3, words, idx, idx, idx, idx)
            name = f"dense{i + 1}" + (f" x{per_word}" if per_word > 1 else "")  # x2: 2 weights a load
            out.append(Kernel(net, name, dense, args, threads, MAX_ROWS))  # grid y: tiles
            out.append(Kernel(net, f"dense{i + 1}_finish", finish, (act3, act2, w, idx), f_threads, MAX_ROWS))
            src = flat = act2
    return out


def find_nvdisasm() -> str | None:
    """nvdisasm on PATH, or in NVIDIA's PyPI wheel (nvidia-cuda-nvdisasm: nvidia/cu*/bin/)."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import nvidia
    except ImportError:
        return None
    for root in nvidia.__path__:
        for path in sorted(glob.glob(os.path.join(root, "*", "bin", "nvdisasm"))):
            return path
    return None


def hot_loop(sass: str) -> tuple[int, int]:
    """(instructions, FFMAs) of the innermost loop with the most FFMA instructions in nvdisasm's
    listing; (0, 0) without a loop. A loop is a branch back to an earlier label; innermost: it
    holds no other loop. Its body runs once per iteration, so instructions / FFMAs is the
    instruction cost of each multiply-add where the kernel spends its time."""
    ins, labels = [], {}
    for line in sass.splitlines():
        label = re.match(r"^\s*(\.L_x_\d+):", line)
        if label:
            labels[label.group(1)] = len(ins)
            continue
        op = re.search(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if op:
            ins.append(op.group(1))
    loops = []
    for i, op in enumerate(ins):
        target = re.search(r"\bBRA\b.*`\((\.L_x_\d+)\)", op)
        if target and labels.get(target.group(1), i + 1) <= i:
            loops.append((labels[target.group(1)], i))
    best = (0, 0)
    for a, b in loops:
        if any(a <= c and d <= b and (c, d) != (a, b) for c, d in loops):
            continue  # holds another loop
        body = ins[a : b + 1]
        fma = sum(1 for x in body if re.search(r"\bFFMA\b", x))
        if fma > best[1]:
            best = (len(body), fma)
    return best


def build_kernels() -> list[Kernel]:
    """The kernel that builds a population's rows on the GPU (nevo.genomes.cuda_build), any net:
    float32 rows, and float16 ones (--weights fp16: rounded as they are stored)."""
    from numba import types

    from nevo.genomes import cuda_build

    f32, i64 = types.float32, types.int64
    a2, a1, i1 = types.Array(f32, 2, "C"), types.Array(f32, 1, "C"), types.Array(i64, 1, "C")
    h2 = types.Array(types.float16, 2, "C")
    return [
        Kernel(f"any net{suffix}", "build_rows", cuda_build.build_rows_kernel, (out, a2, i1, i1, a1, a1, a1),
               cuda_build.BUILD_THREADS, MAX_ROWS, unfused=True)
        for suffix, out in (("", a2), (", fp16", h2))
    ]  # fmt: skip


class _TargetDevice:
    """Stands for the GPU when there is none: numba.cuda compiles a kernel's device functions for
    the current device's compute capability, so during a compile it must be the target's."""

    def __init__(self, cc):
        self.compute_capability = cc


def compile_report(kernel: Kernel, arch: str, ptxas: str, folder: str, nvdisasm: str | None = None) -> dict:
    """PTX by NVVM, machine code by ptxas -v: the kernel's resources and what its PTX holds."""
    from numba import cuda
    from numba.cuda import dispatcher

    cc = (int(arch[3]), int(arch[4:]))
    current = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: _TargetDevice(cc)
    try:
        ptx, _ = cuda.compile_ptx(kernel.dispatcher.py_func, kernel.argtypes, cc=cc)
    finally:
        dispatcher.get_current_device = current
    name = f"{kernel.net}_{kernel.name}_{arch}".replace(", ", "_").replace(" ", "_")
    path = os.path.join(folder, name)
    with open(path + ".ptx", "w") as f:
        f.write(ptx)
    run = subprocess.run(
        [ptxas, f"-arch={arch}", "-v", path + ".ptx", "-o", path + ".cubin"], capture_output=True, text=True
    )
    if run.returncode != 0:
        raise RuntimeError(f"ptxas failed on {kernel.net} {kernel.name}: {run.stderr.strip()[:500]}")

    def number(pattern):
        m = re.search(pattern, run.stderr)
        return int(m.group(1)) if m else 0

    body = [line for line in ptx.splitlines() if line.strip() and not line.strip().startswith(("//", "."))]
    loop, ffma = (0, 0), 0
    if nvdisasm:
        sass = subprocess.run([nvdisasm, "-c", path + ".cubin"], capture_output=True, text=True)
        if sass.returncode != 0:
            raise RuntimeError(f"nvdisasm failed on {kernel.net} {kernel.name}: {sass.stderr.strip()[:500]}")
        loop = hot_loop(sass.stdout)
        ffma = len(re.findall(r"\bFFMA\b", sass.stdout))
    return {
        "ffma": ffma,
        "loop": loop[0],
        "loop_ffma": loop[1],
        "registers": number(r"Used (\d+) registers"),
        "smem": number(r"(\d+) bytes smem"),
        "stack": number(r"(\d+) bytes stack frame"),
        "spill_stores": number(r"(\d+) bytes spill stores"),
        "spill_loads": number(r"(\d+) bytes spill loads"),
        "fp64": sum(1 for line in body if re.search(r"\.f64\b", line)),
        "divisions": sum(1 for line in body if re.search(r"\bdiv\.", line)),
        "instructions": len(body),
    }


def problems(kernel: Kernel, r: dict) -> list[str]:
    """What fails: spills, local memory, fp64, or a launch limit at up to MAX_ROWS rows."""
    bad = []
    if r["spill_stores"] or r["spill_loads"]:
        bad.append(f"spills {r['spill_stores']}/{r['spill_loads']} bytes")
    if r["stack"]:
        bad.append(f"{r['stack']} bytes of local memory (stack)")
    if r["fp64"]:
        bad.append(f"{r['fp64']} fp64 instructions")
    if kernel.unfused and r.get("ffma", 0):
        bad.append(f"{r['ffma']} fused multiply-adds where the CPU rounds the product and the sum apart")
    if kernel.threads > MAX_THREADS:
        bad.append(f"{kernel.threads} threads per block > {MAX_THREADS}")
    if r["registers"] * kernel.threads > MAX_REGS_PER_BLOCK:
        bad.append(f"{r['registers']} registers x {kernel.threads} threads > {MAX_REGS_PER_BLOCK}")
    if r["smem"] > MAX_STATIC_SMEM:
        bad.append(f"{r['smem']} bytes of shared memory > {MAX_STATIC_SMEM}")
    if kernel.grid_y > MAX_GRID_Y:
        bad.append(f"grid y {kernel.grid_y} at {MAX_ROWS:,} rows > {MAX_GRID_Y}")
    return bad


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m experiments.bench.kernel_report", description=__doc__.split("\n")[0]
    )
    p.add_argument("--arch", nargs="+", default=["sm_90", "sm_80"], help="(default: sm_90 sm_80)")
    p.add_argument("--ptxas", default=shutil.which("ptxas"), help="ptxas to use (default: the one on PATH)")
    p.add_argument("--nets", nargs="+", default=list(NETS), choices=list(NETS), metavar="NET",
                   help=f"(default: all: {', '.join(NETS)})")  # fmt: skip
    a = p.parse_args(argv)
    nvdisasm = find_nvdisasm()
    if not nvdisasm:
        print("note: no nvdisasm (pip install nvidia-cuda-nvdisasm): no hot-loop counts", file=sys.stderr)
    if not a.ptxas:
        print("error: no ptxas on PATH (CUDA's assembler; give one with --ptxas)", file=sys.stderr)
        return 2
    failed, firsts = 0, {}
    print(f"{'net':<22} {'kernel':<14} {'arch':<6} {'regs':>4} {'smem':>6} {'stack':>5} {'spill':>5} "
          f"{'fp64':>4} {'div':>4} {'ptx lines':>9} {'threads':>7} {'loop':>5} {'FFMA':>4} {'i/FFMA':>6}"
          "  problems")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        every = [kernel for net in a.nets for kernel in kernels(net)] + build_kernels()
        for kernel in every:
            net = kernel.net
            for arch in a.arch:
                r = compile_report(kernel, arch, a.ptxas, folder, nvdisasm)
                if kernel.name == "conv1" and arch == "sm_90" and r["loop_ffma"] and not r["divisions"]:
                    firsts[net] = r["loop"] / r["loop_ffma"]  # no division: every FFMA is a MAC
                bad = problems(kernel, r)
                failed += bool(bad)
                print(f"{net:<22} {kernel.name:<14} {arch:<6} {r['registers']:>4} {r['smem']:>6} "
                      f"{r['stack']:>5} {r['spill_stores'] + r['spill_loads']:>5} {r['fp64']:>4} "
                      f"{r['divisions']:>4} {r['instructions']:>9} {kernel.threads:>7} {r['loop']:>5} "
                      f"{r['loop_ffma']:>4} {r['loop'] / max(r['loop_ffma'], 1):>6.1f}  "
                      f"{'; '.join(bad) or 'ok'}", flush=True)  # fmt: skip
    for net, before in FIRST_CONV_BEFORE.items():
        if net in firsts:
            print(f"{net} conv1 (sm_90): {firsts[net]:.1f} instructions per multiply-add in its hot loop, "
                  f"{before:.1f} before: {before / firsts[net]:.1f}x fewer")  # fmt: skip
    if failed:
        print(f"\n{failed} kernel compilations with a problem")
    else:
        limits = f"within the launch limits up to {MAX_ROWS:,} rows"
        print(f"\nevery kernel: no spill, no local memory, no fp64, {limits}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
