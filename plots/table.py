"""`python -m plots.table RUN_DIR ...` in a checkout: `nevo plot table` (nevo.plots.table)."""

import sys

from nevo.plots.table import main

if __name__ == "__main__":
    sys.exit(main())
