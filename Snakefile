# rnnrepro — the workflow's table of contents. Rules live in workflow/rules/, the config in config/.
#   snakemake --cores 8 --use-conda all                      every table and figure (budget from config)
#   snakemake --cores 8 results/paper/tables/pru_table1.csv  one artifact (results/<budget>/; smoke: results/)
#   snakemake --profile profiles/smoke                       the CPU smoke run (what `make smoke` runs)
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


# `snakemake --report report.html`: every table and figure with its caption (docs/report.md)
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/speed.smk"
include: "workflow/rules/analysis.smk"


rule all:
    default_target: True
    input:
        all_artifacts(),
