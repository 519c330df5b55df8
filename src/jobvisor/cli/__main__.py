"""`python -m jobvisor.cli`: the same command line as the `jobvisor` script."""

import sys

from . import main

sys.exit(main())
