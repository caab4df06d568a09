"""`python -m nevo`: the `nevo` command (nevo.command) without its installed script."""

import sys

from nevo.command import main

sys.exit(main())
