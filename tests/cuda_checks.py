"""The numba.cuda forward (nevo/nets/kernels/cuda.py) against the NumPy reference, as checks in a process.

    NUMBA_ENABLE_CUDASIM=1 python -m tests.cuda_checks   # small shapes on the CUDA simulator (CI,
                                                          # through tests/test_cuda.py)
    python -m tests.cuda_checks --full                    # on a GPU: the same, plus large and
                                                          # small at 84x84 with hundreds of rows

The simulator must be switched on before numba.cuda is first imported, and the rest of the test
suite runs with the real CPU backend, so these checks run in a process of their own. Each check is
a function whose docstring states its property. Every run draws fresh random weights, inputs and
active-row subsets (the seed is printed; --seed repeats a run), and every launch writes into
buffers poisoned with NaN (actions -1) first, so an element no kernel writes fails the check.

This module holds the runner and the registry of the checks (CHECKS: name -> function; --only takes
those names). The checks are in tests/cuda_checks_forward.py (the forward kernels' results),
tests/cuda_checks_weights.py (weight rows: built on the device, read in words, loaded) and
tests/cuda_checks_policy.py (CudaPolicy's calls: gathered rows, steps in flight, buffers, the device
choice); tests/cuda_checks_common.py holds what they share.
"""

import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

# tiny test grids are meant: no "under-utilization" warnings on a real GPU (read at numba's import)
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

if not __package__:  # run as a script (python tests/cuda_checks.py): the checks' package on the path
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests import cuda_checks_forward as forward
from tests import cuda_checks_policy as policy
from tests import cuda_checks_weights as weights

SMALL = [
    forward.forward_matches_reference,
    forward.conv_tiles_match_reference,
    forward.conv_tiles_bound_threads_per_block,
    weights.device_build_matches_host_build,
    weights.fp16_weights_match_reference,
    weights.word_loads_match_single_loads,
    forward.conv_pixels_per_thread_give_the_same_outputs,
    policy.gathered_rows_match_given_rows,
    policy.steps_in_flight_keep_their_own_actions,
    policy.pipeline_with_steps_in_flight_plays_the_synchronous_episodes,
    forward.continuous_actions_match_reference,
    weights.evaluator_builds_its_rows_on_the_device,
    forward.float32_vectors_match_reference,
    policy.policy_reuses_buffers,
    weights.load_reuses_weight_memory,
    forward.rows_do_not_interact,
    forward.zero_rows_and_ties,
    forward.module_forward_has_reference_signature,
    policy.resolve_device_picks_cpu_under_the_simulator,
    policy.memory_error_is_clear,
]
FULL = [forward.full_size_matches_reference]
CHECKS = {f.__name__: f for f in SMALL + FULL}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true", help="also the full-size checks (needs a GPU)")
    p.add_argument("--seed", type=int, default=None, help="repeat a run (default: a fresh seed)")
    p.add_argument("--only", nargs="+", choices=sorted(CHECKS), help="run only these checks")
    p.add_argument("--json", help="also write {check: {ok, error, seconds, seed}} here")
    args = p.parse_args(argv)
    import numba

    if args.full and numba.config.ENABLE_CUDASIM:
        p.error("--full needs a real GPU: unset NUMBA_ENABLE_CUDASIM")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    mode = "CUDA simulator" if numba.config.ENABLE_CUDASIM else "GPU"
    print(f"cuda checks on the {mode}, seed {seed} (repeat with --seed {seed})", flush=True)
    names = args.only or [f.__name__ for f in SMALL + (FULL if args.full else [])]
    results = {}
    for k, name in enumerate(names):
        rng = np.random.default_rng([seed, k])
        t0 = time.perf_counter()
        try:
            CHECKS[name](rng, args.full)
            ok, error = True, ""
        except Exception:
            ok, error = False, traceback.format_exc()
        seconds = time.perf_counter() - t0
        results[name] = {"ok": ok, "error": error, "seconds": round(seconds, 2), "seed": seed}
        print(f"{'PASS' if ok else 'FAIL'} {name} ({seconds:.1f} s)", flush=True)
        if error:
            print(error, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    failed = [n for n, r in results.items() if not r["ok"]]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
