"""The roofline, measured by nevo itself (`nevo roofline`): each net's forward and an Atari
generation beside what this machine's memory bandwidth and fp32 peak allow, and what an H100 box
would allow (a model, or the GPU at hand measured).

- `cpu`: this machine's roof: its memory bandwidth (streaming reads) and fp32 peak (an FMA probe
  and BLAS's sgemm, OpenBLAS's own kernel choice included), and what the CPU says of itself.
- `gpu`: the GPU at hand: its memory's streaming read and fp32 FMA peak, and nevo's CUDA forward.
- `layers`: a forward's FLOP and bytes, layer by layer; the roofline's rate of them; the drivers
  that run one layer alone over distinct rows; the rotated individuals and real observations.
- `table`: the forward table: each net's layers and whole forward measured and printed.
- `emulators`: the emulators' limits with random actions and no inference (ale-py's vector env,
  bare emulators in one process per core, nevo's emulator pool), and a fresh population.
- `generation`: end to end: one generation of nevo's evaluator, its time split, beside those limits.
- `report`: the command (`main`): the machine's figures, the forward table, then the generation;
  its docstring is the full description of every figure.
"""
