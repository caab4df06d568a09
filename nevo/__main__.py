"""`python -m nevo`: the `nevo` command (nevo.command, behind nevo.entry's guard) without its
installed script."""

import sys

from nevo.entry import main

sys.exit(main())
