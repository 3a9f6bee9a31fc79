# One rule per artifact: papermill runs the artifact's jupytext notebook over the cells' metrics and
# writes its tables and figures. Cheap: redrawing never retrains (showyourwork's split). The outputs are
# update(): Snakemake keeps an earlier run's tables and figures while the job runs and puts them back if
# it fails; the notebook runner replaces them only once the notebook has succeeded. Param last_failure
# has the next run plan a notebook that failed again (rnnrepro.analysis.failed_notebooks).


for _study in STUDIES:
    for _artifact in STUDIES[_study]["artifacts"]:
        _out = artifact_outputs(_study, _artifact)

        rule:
            name:
                f"notebook_{_study}_{_artifact}"
            input:
                # metrics, evaluations, weights (where the notebook reads them), speed
                **notebook_inputs(STUDIES[_study], config, _artifact),
                notebook=STUDIES[_study]["artifacts"][_artifact]["notebook"],
                study=f"config/studies/{_study}.yaml",
                # the run files below, listed: newer than the tables when the grid changed
                # (rnnrepro.artifact_inputs; the tables `records render` wrote keep no metadata)
                inputs_list=inputs_list_of(_study, _artifact, _out),
            output:
                tables=[
                    update(report_output(path, _study, _artifact, "table"))
                    for path in _out["tables"]
                ],
                figures=[
                    update(report_output(path, _study, _artifact, "figure"))
                    for path in _out["figures"]
                ],
                notebook=update(_out["notebook"]),
            log:
                f"{LOGS}/notebooks/{_study}_{_artifact}.log",
            conda:
                ENV
            params:
                study=_study,
                artifact=_artifact,
                last_failure=last_failure(_out["notebook"]),
            shell:
                "python -m rnnrepro.analysis.run_notebook {input.notebook:q} {output.notebook:q} "
                "--study {params.study} --artifact {params.artifact} --metrics {input.metrics:q} "
                "--tables {output.tables:q} --figures {output.figures:q} > {log:q} 2>&1"


# The claims scorecard (docs/claims.md): every study's claims against every study's tables, so it is
# the last job of `all`. Claims are checked when the workflow is parsed, before any job runs.
with config_errors_stop_the_workflow():
    for _study in STUDIES:
        check_claims(STUDIES[_study])


CLAIMS_CAPTION = caption_file(
    "claims", lambda: claims_caption(config, STUDIES, Path(workflow.basedir))
)


rule claims:
    input:
        notebook="notebooks/claims.py",
        studies=[f"config/studies/{study}.yaml" for study in STUDIES],
        tables=claimed_tables(),
    output:
        tables=[
            update(
                report(
                    path,
                    caption=CLAIMS_CAPTION,
                    category="Claims scorecard",
                    labels={
                        "artifact": "claims",
                        "type": "table",
                        "name": Path(path).stem,
                    },
                )
            )
            for path in claims_outputs(RESULTS, list(STUDIES))["tables"]
        ],
        figures=[
            update(
                report(
                    path,
                    caption=CLAIMS_CAPTION,
                    category="Claims scorecard",
                    labels={
                        "artifact": "claims",
                        "type": "figure",
                        "name": Path(path).stem,
                    },
                )
            )
            for path in claims_outputs(RESULTS, list(STUDIES))["figures"]
        ],
        notebook=update(f"{RESULTS}/notebooks/claims.ipynb"),
    log:
        f"{LOGS}/notebooks/claims.log",
    conda:
        ENV
    params:
        last_failure=last_failure(f"{RESULTS}/notebooks/claims.ipynb"),
        run_config=json.dumps(
            {
                "budget": config["budget"],
                "seeds": config["seeds"],
                "studies": list(STUDIES),
            }
        ),
    # The scorecard of this budget's other scale (cpu_wide beside cpu), where it exists, is read
    # beside this one's but is not an input: building it would train that scale's grid.
    shell:
        "python -m rnnrepro.analysis.claims {input.notebook:q} {output.notebook:q} "
        "--run-config {params.run_config:q} --tables-in {input.tables:q} "
        "--tables {output.tables:q} --figures {output.figures:q} > {log:q} 2>&1"
