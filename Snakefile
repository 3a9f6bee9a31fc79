# rnnrepro — the workflow's table of contents. Rules live in workflow/rules/, the config in config/.
#   snakemake --cores 8 --use-conda all               every table and figure (budget from config: paper)
#   snakemake --cores 8 results/tables/pru_table1.csv   one artifact (paper: results/; other budgets: results/<budget>/)
#   snakemake --profile profiles/smoke all              the CPU smoke run (what `make smoke` runs)
# Every run of `all` ends with the budget's results page, results/<budget>/index.html (results/index.html at paper).
from snakemake.utils import min_version

min_version("9.0")


# a YAML mistake in the config file named with its line, before Snakemake reads it
include: "workflow/rules/config_file.smk"


configfile: "config/config.yaml"


# `snakemake --report report.html`: every table and figure with its caption (docs/report.md)
report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/inputs.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/speed.smk"
include: "workflow/rules/records.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/page.smk"


rule all:
    default_target: True
    input:
        all_artifacts(),
        rules.results_page.output,


# The targets asked for, checked against every budget's outputs before Snakemake plans (common.smk).
check_the_command()
