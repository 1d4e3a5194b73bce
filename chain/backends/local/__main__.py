"""``python -m chain.backends.local``: the local backend's own commands."""

import sys

from chain.backends.local.commands import main

sys.exit(main())
