"""Paper-style figures and tables of run folders: what `nevo plot KIND` draws.

- `curves`: score against frames, generations and hours; `throughput`: frames/s, the straggler
  tail, the forward's share and the cores busy over a run; `table`: the tested elite beside the
  published Atari scores (data/published_atari.json); `mujoco`: MuJoCo runs beside OpenAI-ES's
  published speed (data/published_mujoco.json).
- `rundata` reads a folder's files, `style` holds the figures' look.

Each figure is remade from the files a run writes alone: nothing here imports training code.
"""
