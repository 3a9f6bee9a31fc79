"""``python -m rnnrepro.analysis.claims``: the scorecard's notebook for a run config
(rnnrepro.analysis.claims.tables.main).
"""

from ...console import run_command
from .tables import main

raise SystemExit(run_command(main))
