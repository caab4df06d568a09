"""`python -m experiments.replay RUN_DIR ...` in a checkout: `nevo replay` (nevo.tools.replay)."""

import sys

from nevo.tools.replay import main

if __name__ == "__main__":
    sys.exit(main())
