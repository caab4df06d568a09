"""Evaluation: genomes and episode seeds in, per-episode results out, on this machine.

- `setup`: the one place that makes an evaluator from the settings, the task and the run folder
  (net, device, weight builder, memory check), for the driver and every cluster worker alike;
  it finds the evaluator that plays the task's kind (nevo.episodes.players);
- `in_process`: the synchronous evaluator of tasks stepped in this process (the maze, gymnasium
  and MuJoCo tasks, a kind of one's own);
- `supervised`: a labelled data set's batches (`--env mnist`).
Atari's evaluator and its pipelines are the Atari backend's (nevo.atari.evaluator); what every
evaluator shares (the episodes' bookkeeping, the weights a policy reads, the observations kept
for safe mutations, `plays`) is nevo.episodes'. On a Dask cluster the same evaluators play each
chunk of episodes (nevo.cluster).
"""
