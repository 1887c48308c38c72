"""``python -m dycore``: the same command line as the ``dycore`` script."""
import sys

from dycore.cli import main

if __name__ == "__main__":
    sys.exit(main())
