"""`python -m experiments.get_mnist ...` in a checkout: `nevo get-mnist` (nevo.tools.get_mnist)."""

import sys

from nevo.tools.get_mnist import main

if __name__ == "__main__":
    sys.exit(main())
