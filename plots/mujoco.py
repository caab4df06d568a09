"""`python -m plots.mujoco RUN_DIR ...` in a checkout: `nevo plot mujoco` (nevo.plots.mujoco)."""

import sys

from nevo.plots.mujoco import main

if __name__ == "__main__":
    sys.exit(main())
