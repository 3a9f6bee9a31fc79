"""Numbers the docs quote from the recorded runs are read again from records/, so they cannot drift from
them: the example cell's parameter count and times (docs/custom_cells.md; wall time and training time
said apart), and what `records render --budget cpu` runs and renders (docs/benchmarks.md)."""

import json
import re

from rnnrepro import records
from rnnrepro.configuration import REPO_ROOT

RUNS = REPO_ROOT / "records/cpu/runs/pru/ptb"


def metrics(model: str) -> list[dict]:
    found = [json.loads(path.read_text()) for path in sorted((RUNS / model).glob("frac*/seed*/metrics.json"))]
    assert found, f"no records of {model} in {RUNS}"
    return found


def test_the_example_cells_parameters_and_times_are_the_records():
    docs = " ".join((REPO_ROOT / "docs/custom_cells.md").read_text().split())
    mgu = metrics("mgu")
    assert len({m["params"] for m in mgu}) == 1
    # the LSTM's count the example was sized against, as its records' configs hold it (the LSTM's own
    # records at those widths may since have been replaced by others)
    sized_to = json.loads((RUNS / "mgu/frac10/seed1111/config.json").read_text())["architecture"]["param_budget"]
    ratio = mgu[0]["params"] / sized_to
    assert f"here {mgu[0]['params']:,} parameters against lstm_m1000's {sized_to:,} ({ratio:.2f}x)" in docs
    epochs = sorted(m["epochs"] for m in mgu)
    wall = ", ".join(f"{m['wall_seconds'] / 60:.1f}" for m in mgu).rsplit(", ", 1)
    training = ", ".join(f"{m['train_seconds'] / 60:.1f}" for m in mgu).rsplit(", ", 1)
    assert len(mgu) == 3
    assert (f"(three seeds, one thread each, {epochs[0]}-{epochs[-1]} epochs) took {' and '.join(wall)} minutes of "
            f"wall time, of which {' and '.join(training)} minutes were training") in docs


def test_the_cpu_render_runs_and_renders_what_benchmarks_md_says(monkeypatch):
    """Which notebooks the render runs comes from its plan (the records and the budget's artifacts);
    of those, the ones that read the cells' weights stop, as records keep none."""
    monkeypatch.setattr(records.rendering, "write_inputs_list", lambda *args, **kwargs: None)  # writes in results/
    monkeypatch.chdir(REPO_ROOT)
    config, studies = records._load("cpu", REPO_ROOT / "config/config.yaml")
    plan = records.render_plan("cpu", config, studies, REPO_ROOT / "records")
    runs = [item for item in plan if item.notebook is not None]
    weights = [item.key.replace("/", "_") for item in runs
               if studies[item.key.split("/")[0]]["artifacts"][item.key.split("/")[1]].get("reads_weights")]
    docs = " ".join((REPO_ROOT / "docs/benchmarks.md").read_text().split())
    said = re.search(r"`records render --budget cpu` runs the notebooks of (\d+) of the (\d+) artifacts \(the other "
                     r"(\d+) are not in the cpu budget or lack current records\) and the scorecard's, from "
                     r"`records/cpu/` \(no training\); (\d+) of them render(?:, and (.+?) stops?, as it reads the "
                     r"cells' weights)?", docs)
    assert said, "docs/benchmarks.md no longer says what the cpu render runs"
    assert [int(n) for n in said.groups()[:4]] == [len(runs), len(plan), len(plan) - len(runs), len(runs) - len(weights)]
    assert re.findall(r"`(\w+)`", said.group(5) or "") == weights
