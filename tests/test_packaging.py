"""The pins: requirements.txt is the lock, an exact version of everything `make` installs; the conda
environments (environment.yml for the driver, workflow/envs/rnnrepro.yaml for the rules) carry the same
versions; the lock holds the package's direct dependencies and the Snakemake the Snakefile asks for.
Every rule has its conda environment and a log."""

import re
import tomllib

import yaml
from packaging.version import Version

from rnnrepro.configuration import REPO_ROOT

PIN = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+)$")
CONDA_ENVIRONMENTS = [REPO_ROOT / "environment.yml", REPO_ROOT / "workflow/envs/rnnrepro.yaml"]
EDITABLE_INSTALL = "-e ."  # environment.yml installs the project itself


def normalized(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): `PyYAML` is `pyyaml`, `a_b` is `a-b`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_lines(path) -> list[str]:
    """The requirements of a requirements file, comments and blank lines left out."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def conda_pip_lines(path) -> list[str]:
    env = yaml.safe_load(path.read_text())
    return next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))


def pins(lines) -> dict[str, str]:
    return {normalized(m.group(1)): m.group(2) for line in lines if (m := PIN.match(line))}


LOCK = pins(requirement_lines(REPO_ROOT / "requirements.txt"))


def test_every_requirement_is_an_exact_pin():
    """A loose line (`torch`, `numpy>=2`) installs whatever is newest on the day of the install."""
    files = {path: requirement_lines(path) for path in sorted(REPO_ROOT.glob("requirements*.txt"))}
    files.update({path: conda_pip_lines(path) for path in CONDA_ENVIRONMENTS})
    for path, lines in files.items():
        loose = [line for line in lines if not PIN.match(line) and line != EDITABLE_INSTALL]
        assert lines and not loose, f"{path.name}: not pinned exactly: {loose}"


def test_conda_environments_match_the_lock():
    for env_file in CONDA_ENVIRONMENTS:
        env = pins(conda_pip_lines(env_file))
        assert env, env_file
        assert {name: LOCK.get(name) for name in env} == env, env_file


def test_the_lock_and_the_rules_environment_hold_every_direct_dependency():
    """pyproject.toml names what the code imports; the lock pins it, and the rules' conda environment
    (which runs the code from src/, without installing the package) installs it."""
    direct = [normalized(re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0])
              for d in tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    assert "torch" in direct
    assert [name for name in direct if name not in LOCK] == []
    rules_env = pins(conda_pip_lines(REPO_ROOT / "workflow/envs/rnnrepro.yaml"))
    assert [name for name in direct if name not in rules_env] == []


def test_the_lock_has_the_snakemake_the_snakefile_asks_for():
    asked = re.search(r'^min_version\("([^"]+)"\)', (REPO_ROOT / "Snakefile").read_text(), re.M)
    assert asked, "the Snakefile states no min_version"
    assert Version(LOCK["snakemake"]) >= Version(asked.group(1))


def test_every_rule_has_a_conda_env_and_a_log():
    """Every rule that runs a command has the project's conda environment and a log. A ``run:`` rule runs
    inside Snakemake's own process, where Snakemake allows no conda environment: it has a log."""
    for smk in (REPO_ROOT / "workflow/rules").glob("*.smk"):
        # each rule's text, from its `rule` line to the next one; directives start their line
        # (`{log:q}` in a shell command is not one)
        blocks = re.split(r"^\s*rule\b", smk.read_text(), flags=re.M)[1:]
        assert blocks or smk.name in ("common.smk", "config_file.smk", "inputs.smk"), smk
        for block in blocks:
            name = block.split(":", 1)[0].strip() or block.split("name:", 1)[-1].split()[0]
            assert re.search(r"^\s+log:", block, re.M), (smk, name)
            runs_here = re.search(r"^\s+run:", block, re.M) is not None
            assert runs_here or re.search(r"^\s+conda:", block, re.M), (smk, name, "no conda environment")


def test_the_python_the_pins_need_is_the_one_the_project_states():
    """The oldest Python every pinned package supports (their Requires-Python) is pyproject's
    requires-python, the README's and the Makefile's check; the conda environments install it."""
    import importlib.metadata

    from packaging.specifiers import SpecifierSet

    candidates = [Version(f"3.{minor}") for minor in range(8, 20)]
    oldest = Version("3.8")
    for name in LOCK:
        try:
            needs = importlib.metadata.metadata(name).get("Requires-Python")
        except importlib.metadata.PackageNotFoundError:  # a pin of another platform's or extra's
            continue
        if needs:
            oldest = max(oldest, next(v for v in candidates if v in SpecifierSet(needs)))
    stated = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert stated == f">={oldest}", f"the pins need Python {oldest}, pyproject.toml states {stated}"
    assert f"Python ≥ {oldest}" in (REPO_ROOT / "README.md").read_text()
    major, minor = oldest.release
    assert f"sys.version_info >= ({major}, {minor})" in (REPO_ROOT / "Makefile").read_text()
    for env_file in CONDA_ENVIRONMENTS:
        pythons = [d for d in yaml.safe_load(env_file.read_text())["dependencies"]
                   if isinstance(d, str) and d.startswith("python=")]
        assert pythons and all(Version(d.split("=", 1)[1]) >= oldest for d in pythons), env_file
