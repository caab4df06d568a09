"""Genomes and how they become weights: the shared noise table, seed-list genomes, the Gaussian and
the safe mutations, and the three builds of a row side by side.

- `noise`: the table of N(0, 1) float32 numbers, seeds -> offsets, `build_rows` (a row = its
  base + scale * eps, Numba on the CPU), `NoiseSource` (seed list -> weights) and `WeightBuilder`
  (a Population's rows where an evaluator uses them);
- `mutation`: the mutation operators (Gaussian, or a safe mutation of Lehman et al. 2018), each
  an object chosen once from its name;
- `safe_mutation` (the sensitivities, Lehman et al. 2018) and `safe_build` (safe children where
  weights are built);
- `cuda_build`: `build_rows` as a numba.cuda kernel, with the noise table resident on the GPU.
"""
