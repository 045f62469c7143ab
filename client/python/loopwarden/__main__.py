import sys

from loopwarden.cli import main

sys.exit(main())
