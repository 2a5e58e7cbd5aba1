"""``python -m analysis.cli``: the ``capcal`` command line."""

import sys

from analysis.cli.main import main

sys.exit(main())
