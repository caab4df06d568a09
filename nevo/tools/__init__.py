"""What the `nevo` command runs besides training and plotting (nevo/command.py's TOOLS).

- `replay`: a run's elite tested as the paper scores it (test.json), and recorded playing.
- `suite`: a table of Atari games, one resumable run per game and seed, each tested.
- `worker`: one Dask worker for --cluster on this node.
- `get_mnist`: MNIST into nevo's cache, fetched once and checked.

(The roofline, `nevo roofline`, is the package nevo.roofline.) The checkout's experiments/ folder
runs each of them as `python -m experiments.NAME` too, through an entry point of a few lines.
"""
