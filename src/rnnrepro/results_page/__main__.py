"""``python -m rnnrepro.results_page``: write a budget's results page (see the package docstring)."""

import sys

from .. import console
from . import main

sys.exit(console.run_command(main))
