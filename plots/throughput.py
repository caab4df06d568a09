"""`python -m plots.throughput RUN_DIR ...` in a checkout: `nevo plot throughput` (nevo.plots.throughput)."""

import sys

from nevo.plots.throughput import main

if __name__ == "__main__":
    sys.exit(main())
