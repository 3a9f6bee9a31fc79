# The run config's file, read with the project's loader before Snakemake's `configfile:` reads it: a
# YAML mistake is named with its file, line and column (Snakemake's message names neither the file nor,
# for a file given with --configfile, the line). The Snakefile reads the config through the project's
# own (torch-free) modules, from this checkout.
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

SRC = Path(workflow.basedir) / "src"
sys.path.insert(0, str(SRC))
from rnnrepro.configuration import ConfigError, load_yaml

try:
    load_yaml(Path("config/config.yaml"))
except ConfigError as error:
    raise WorkflowError(str(error))
