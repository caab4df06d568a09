"""The developer benchmarks: what nevo's parts cost on this machine (the forward, the pipeline
against its emulator limits, the algorithms' own work, a cluster, the CUDA kernels' machine code),
each against its reference or beside the code before a change. A user's runs and the papers'
reproductions are one folder up, and a user's "how fast is this machine" is `nevo roofline`
(nevo.roofline, whose emulator limits `bench_pipeline` measures too). Each module runs as
`python -m experiments.bench.NAME --help`; their figures, with machine, date and command, are in
docs/performance.md and docs/lab/.
"""
