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
                notebook=STUDIES[_study]["artifacts"][_artifact]["notebook"],
                study=f"config/studies/{_study}.yaml",
                metrics=artifact_metrics(_study, _artifact),
                evaluations=artifact_evaluation_files(
                    STUDIES[_study], config, _artifact
                ),
                speed=(
                    f"{RESULTS}/speed/{_study}.json"
                    if STUDIES[_study]["artifacts"][_artifact].get("speed")
                    else []
                ),
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
                # the report's caption of its tables and figures (workflow/report/caption.rst)
                caption=artifact_caption(
                    STUDIES[_study], config, _artifact, Path(workflow.basedir)
                ),
            shell:
                "python -m rnnrepro.analysis.run_notebook {input.notebook:q} {output.notebook:q} "
                "--study {params.study} --artifact {params.artifact} --metrics {input.metrics:q} "
                "--tables {output.tables:q} --figures {output.figures:q} > {log:q} 2>&1"


# The claims scorecard (docs/claims.md): every study's claims against every study's tables, so it is
# the last job of `all`. Claims are checked when the workflow is parsed, before any job runs.
with config_errors_stop_the_workflow():
    for _study in STUDIES:
        check_claims(STUDIES[_study])


rule claims:
    input:
        notebook="notebooks/claims.py",
        studies=[f"config/studies/{study}.yaml" for study in STUDIES],
        tables=all_tables(),
    output:
        tables=[
            update(
                report(
                    path,
                    caption="../report/caption.rst",
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
                    caption="../report/caption.rst",
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
        caption=claims_caption(config, STUDIES, Path(workflow.basedir)),
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
