"""Evaluation: genomes and episode seeds in, per-episode results out, on this machine or a cluster.

- `episodes`: what crosses the boundary (`Population`, `Episodes`, `Results`), plain arrays;
- `setup`: the one place that makes an evaluator from the settings, the task and the run folder
  (net, device, weight builder, memory check), for the driver and every cluster worker alike;
- `pipeline`: the Atari pipeline (nevo's emulator processes; on the CPU each plays whole episodes
  with its own forward, on a GPU groups of them step while batched inference runs);
  `in_process`: the synchronous evaluator of tasks stepped in this process (the maze, gymnasium
  and MuJoCo tasks); `episode_book`: the episodes' bookkeeping both share;
- `slot_weights`: the weights a policy reads, built per slot or for the whole population;
- `experiences`: the observations kept per episode for safe mutations.
On a Dask cluster the same evaluators play each chunk of episodes (nevo.cluster).
"""
