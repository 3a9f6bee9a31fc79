"""``python -m rnnrepro.records``: the command line (rnnrepro.records.cli)."""

from ..console import run_command
from .cli import main

raise SystemExit(run_command(main))
