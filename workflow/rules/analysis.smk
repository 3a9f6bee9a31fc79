# One rule per artifact: papermill runs the artifact's jupytext notebook over the cells' metrics and
# writes its tables and figures. Cheap: redrawing never retrains (showyourwork's split).


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
            output:
                tables=_out["tables"],
                figures=_out["figures"],
                notebook=_out["notebook"],
            log:
                f"logs/notebooks/{_study}_{_artifact}.log",
            conda:
                ENV
            params:
                study=_study,
                artifact=_artifact,
            shell:
                "python -m rnnrepro.analysis.run_notebook {input.notebook} {output.notebook} "
                "--study {params.study} --artifact {params.artifact} --metrics {input.metrics:q} "
                "--tables {output.tables:q} --figures {output.figures:q} > {log} 2>&1"
