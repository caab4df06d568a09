"""One Dask worker for nevo on this node, from this checkout: `nevo worker` (nevo.tools.worker).
From the checkout, or by its path from anywhere:

    python -m experiments.cluster_worker tcp://10.0.0.1:8786 --host 10.0.0.2  # in the checkout
    python /path/to/nevo/experiments/cluster_worker.py tcp://10.0.0.1:8786  # the same, from anywhere
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nevo

from nevo.tools.worker import main  # noqa: E402 (after the path that finds it)

if __name__ == "__main__":
    main()
