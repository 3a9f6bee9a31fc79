"""The pins: requirements.txt is the lock; the conda environments carry the same versions."""

import re

import yaml

from rnnrepro.configuration import REPO_ROOT


def pins(lines):
    return {m.group(1).lower(): m.group(2) for line in lines if (m := re.match(r"^([A-Za-z0-9_.-]+)==(\S+)$", line))}


def conda_pip_pins(path):
    env = yaml.safe_load(path.read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    return pins(pip_section)


def test_requirements_pin_torch_exactly():
    lock = pins((REPO_ROOT / "requirements.txt").read_text().splitlines())
    assert lock["torch"] == "2.13.0"
    assert lock["snakemake"].startswith("9.")


def test_conda_environments_match_the_lock():
    lock = pins((REPO_ROOT / "requirements.txt").read_text().splitlines())
    for env_file in (REPO_ROOT / "environment.yml", REPO_ROOT / "workflow/envs/rnnrepro.yaml"):
        env = conda_pip_pins(env_file)
        assert env, env_file
        assert {name: lock.get(name) for name in env} == env, env_file


def test_every_rule_has_a_conda_env_and_a_log():
    for smk in (REPO_ROOT / "workflow/rules").glob("*.smk"):
        text = smk.read_text()
        rules = re.findall(r"^\s*rule\b", text, re.M)
        assert text.count("conda:") == len(rules), smk
        assert text.count("log:") == len(rules), smk
