"""`python -m experiments.suite RESULTS ...` in a checkout: `nevo suite` (nevo.tools.suite)."""

import sys

from nevo.tools.suite import main

if __name__ == "__main__":
    sys.exit(main())
