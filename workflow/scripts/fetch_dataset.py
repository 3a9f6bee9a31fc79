"""The fetch_dataset rule: `python -m rnnrepro.data fetch` with the config's source settings.

`data_mirror` and `trust_unverified_downloads` are read from the config here instead of arriving as
rule params: Snakemake reruns a job whose params changed and then everything downstream of it, yet
neither setting changes what this job writes (a file whose digest the registry fixes). So setting,
changing or dropping a mirror never refetches, let alone retrains (tests/test_data.py).
"""

import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from rnnrepro.data.__main__ import main

smk = snakemake  # noqa: F821 (defined by Snakemake's script preamble)
args = ["fetch", smk.wildcards.dataset, "--dest", str(Path(smk.output[0]).parent)]
if smk.config["data_mirror"]:
    args += ["--mirror", smk.config["data_mirror"]]
if smk.config["trust_unverified_downloads"]:
    args.append("--trust-unverified")
with open(smk.log[0], "w") as log, redirect_stdout(log), redirect_stderr(log):
    status = main(args)
sys.exit(status)
