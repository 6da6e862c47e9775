"""`python -m loop.cli`: the `loopdeck` command without its console script (the detached runner
`resume` starts, scripts, tests)."""

import sys

from loop.cli import main

sys.exit(main())
