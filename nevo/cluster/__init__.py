"""nevo on a Dask cluster (`--cluster`): the driver's evaluator (`evaluator`: a generation's
episodes in chunks over the workers), its connection to the cluster (`connection`: the scheduler
reached or a local cluster started, the workers set up and followed), and each worker's side
(`worker`: set up once per run, play chunks through the same evaluators as one machine)."""
