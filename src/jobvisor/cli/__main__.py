"""`python -m jobvisor.cli`: the same command line as the `jobvisor` script."""

import sys

from . import main

if __name__ == "__main__":  # imported by a documentation tool, it runs nothing
    sys.exit(main())
