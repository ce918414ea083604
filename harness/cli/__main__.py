"""``python -m harness.cli``: the ``etai`` command where its console script is not on the PATH."""

import sys

from harness.cli import main

sys.exit(main())
