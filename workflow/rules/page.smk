# The results page (rnnrepro.results_page): what held at this budget, the scorecard, then every
# artifact's figures and tables with their captions, in one self-contained HTML file. It reads every
# output of `all`, so it is the last job of `all`; `snakemake --report` stays the workflow's view.
from rnnrepro.layout import RESULTS_PAGE


rule results_page:
    input:
        outputs=all_artifacts(),
        template="src/rnnrepro/templates/results_page.html.j2",
    output:
        f"{RESULTS}/{RESULTS_PAGE}",
    log:
        f"{LOGS}/notebooks/results_page.log",
    conda:
        ENV
    params:
        run_config=json.dumps(
            {
                "budget": config["budget"],
                "seeds": config["seeds"],
                "studies": list(STUDIES),
            }
        ),
    shell:
        "python -m rnnrepro.results_page --run-config {params.run_config:q} > {log:q} 2>&1"
