"""`python -m plots.curves RUN_DIR ...` in a checkout: `nevo plot curves` (nevo.plots.curves)."""

import sys

from nevo.plots.curves import main

if __name__ == "__main__":
    sys.exit(main())
