"""Every `snakemake` command line in README.md and docs/**/*.md, and in the comments that head the
example and config files (examples/*.yaml, config/config.yaml, profiles/*/config.yaml, the Snakefile),
works as written and gives what it promises: each is dry-run
(`-n` put right after `snakemake`, nothing else changed) in a copy of the project (with examples/),
so a command that Snakemake cannot parse, a target that no rule makes, a config value the schema
refuses or a file that does not exist fails here; so does an elided one (`...`), and one whose
profile's budget another of its settings silently replaces (the workflow says so in one line: a
`--configfile` after `--profile profiles/smoke` drops the profile's run config).

What is substituted, and why:
- the value of `data_mirror=` (DIR, /path/to/mirror, ../shared/data: a folder on the reader's machine)
  becomes an empty folder made for the test; a dry run only plans the fetch;
- `--use-conda` is dropped where no `conda` is installed (a dry run with it asks conda for its
  version); the conda environment's pins are checked against requirements.txt by test_packaging;
- a command that runs jobs must say how many cores (`--cores`, or a profile that sets them): a dry
  run does not need them, so this is checked on the words of the command;
- `--report [FILE]` is dropped: a report is built from finished results, which a dry run has not
  made (the smoke test builds one); the rest of the command, its targets and config, is dry-run;
- a command using `profiles/slurm` needs the SLURM executor plugin, which requirements.txt pins; it
  is dry-run like the others (nothing is submitted), and skipped, saying so, where the plugin is absent.

Commands that differ only in their targets (and in `--cores`, which a dry run does not use) are planned
together, in one dry run of all their targets: a dry run builds the whole workflow's rules, most of its
time, and a plan that resolves every target resolves each of them. Where such a run fails, each command
of the group is dry-run again alone, so a failure names its own command and output.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
from pathlib import Path

import pytest
from conftest import BIN, copy_project
from snakemake_runs import run_all

from rnnrepro.configuration import REPO_ROOT

SLURM_PLUGIN = importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE = re.compile(r"`([^`\n]+)`")
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def command_lines(markdown: str) -> list[str]:
    """The `snakemake ...` command lines of a markdown text: lines of fenced or indented code blocks
    (a trailing `# comment` removed, a line ending in a backslash joined with the next) and inline
    code spans (in prose and in tables)."""
    commands = []
    in_fence = False
    pending = ""
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence, pending = not in_fence, ""
            continue
        if in_fence or line.startswith("    "):
            code = pending + line.split(" #", 1)[0]
            if code.rstrip().endswith("\\"):
                pending = code.rstrip()[:-1] + " "
                continue
            candidates, pending = [code], ""
        else:
            candidates = INLINE.findall(line)
        for candidate in candidates:
            words = candidate.split()
            while words and ENV_ASSIGNMENT.match(words[0]):
                words = words[1:]
            if len(words) > 1 and words[0] == "snakemake":  # the bare word names the program
                commands.append(" ".join(candidate.split()))
    return commands


COMMENTED = re.compile(r"^#\s+(snakemake\s.*)$")
DESCRIPTION = re.compile(r"\s{3,}\S.*$")  # what a commented command gives, after three or more spaces


def commented_commands(text: str) -> list[str]:
    """The `snakemake ...` command lines in the comments of a YAML file or the Snakefile (`#   snakemake
    ...   what it gives`), a line ending in a backslash joined with the next comment line."""
    commands, pending = [], None
    for line in text.splitlines():
        body = line[1:].strip() if line.startswith("#") else None
        if pending is not None and body is not None:
            line, pending = "# " + pending + " " + body, None
        elif pending is not None:
            pending = None
        match = COMMENTED.match(line)
        if not match:
            continue
        if match.group(1).rstrip().endswith("\\"):
            pending = match.group(1).rstrip()[:-1].strip()
            continue
        commands.append(" ".join(DESCRIPTION.sub("", match.group(1)).split()))
    return commands


COMMENTED_FILES = ["Snakefile", "config/config.yaml", "profiles/*/config.yaml", "examples/*.yaml"]


def documented_commands() -> dict[str, list[str]]:
    """Each distinct command, and the pages and files that write it."""
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("**/*.md"))]
    found: dict[str, list[str]] = {}
    for page in pages:
        for command in command_lines(page.read_text(encoding="utf-8")):
            found.setdefault(command, []).append(page.relative_to(REPO_ROOT).as_posix())
    for pattern in COMMENTED_FILES:
        for path in sorted(REPO_ROOT.glob(pattern)):
            for command in commented_commands(path.read_text(encoding="utf-8")):
                found.setdefault(command, []).append(path.relative_to(REPO_ROOT).as_posix())
    return {command: sorted(set(where)) for command, where in found.items()}


COMMANDS = documented_commands()


def dry_run_arguments(command: str, mirror: Path) -> tuple[dict[str, str], list[str]]:
    """The environment assignments and the snakemake arguments of ``command``, as a dry run."""
    words = shlex.split(command)
    env = {}
    while ENV_ASSIGNMENT.match(words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    assert words[0] == "snakemake"
    arguments = [re.sub(r"^data_mirror=.*", f"data_mirror={mirror}", word) for word in words[1:]]
    if "--use-conda" in arguments and shutil.which("conda") is None:
        arguments.remove("--use-conda")
    if "--report" in arguments:
        at = arguments.index("--report")
        has_file = at + 1 < len(arguments) and re.search(r"\.(html|zip)$", arguments[at + 1])
        del arguments[at:at + 2 if has_file else at + 1]
    return env, ["-n", *arguments]


def dry_runs_of(commands: list[str], projects: list[Path], mirror: Path) -> dict[str, tuple[int, str]]:
    """Exit status and output of each command as a dry run, two at a time, in the given projects."""
    jobs, unparsable = [], {}
    for command, project in zip(commands, projects):
        try:
            env, arguments = dry_run_arguments(command, mirror)
        except ValueError as error:  # e.g. an unclosed quote: what a shell would refuse too
            unparsable[command] = (2, f"a shell cannot split this command: {error}")
            continue
        jobs.append((command, (project, arguments, {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(project), **env},
                               project / "dry_run.log")))
    return {**dict(zip([c for c, _ in jobs], run_all([job for _, job in jobs]))), **unparsable}


def planned_apart(arguments: list[str]) -> tuple[str, list[str], list[str]] | None:
    """What a dry run plans besides its targets (its words but the targets, the cores and `-n`), the
    arguments without the targets, and the targets (as Snakemake's parser reads them); None where
    that parser refuses the arguments (that command is dry-run alone, to show Snakemake's message)."""
    from snakemake.cli import get_argument_parser

    try:
        parsed = get_argument_parser().parse_args(arguments)
    except SystemExit:
        return None
    targets = list(parsed.targets or [])
    rest = list(arguments)
    for target in targets:
        rest.remove(target)
    plan, words = [], iter(rest)
    for word in words:
        if word in ("--cores", "-c"):
            next(words, None)
        elif word not in ("-n", "--dry-run", "--dryrun"):
            plan.append(word)
    return repr(plan), rest, targets


def grouped_dry_runs(commands: list[str], folder, mirror: Path) -> dict[str, tuple[int, str]]:
    """Exit status and output of each command as a dry run: commands that plan the same but for their
    targets share one dry run of all their targets (module docstring); a group whose run fails is
    dry-run again one command at a time. ``folder()`` makes a fresh project copy."""
    groups: dict[tuple, list[str]] = {}
    parsed = {}  # command -> (environment, planned_apart of its arguments)
    for command in commands:
        try:
            env, arguments = dry_run_arguments(command, mirror)
        except ValueError:
            apart = None
        else:
            apart = planned_apart(arguments)
        if apart is None:
            groups[("alone", command)] = [command]
            continue
        parsed[command] = (env, apart)
        groups.setdefault((tuple(sorted(env.items())), apart[0]), []).append(command)

    combined: dict[str, list[str]] = {}  # a group's one command line -> its commands
    for key, members in groups.items():
        if len(members) == 1:
            combined[members[0]] = members
            continue
        env, (plan, rest, _) = parsed[members[0]]
        targets = list(dict.fromkeys(t for m in members for t in parsed[m][1][2]))
        words = [f"{k}={v}" for k, v in env.items()] + ["snakemake", *targets, *[w for w in rest if w != "-n"]]
        together = shlex.join(words)
        again = planned_apart(dry_run_arguments(together, mirror)[1])
        if again is None or again[0] != plan or again[2] != targets:  # not the same plan: each alone
            combined.update({m: [m] for m in members})
        else:
            combined[together] = members

    lines = list(combined)
    results = dry_runs_of(lines, [folder() for _ in lines], mirror)
    outcome, failed = {}, []
    for line, members in combined.items():
        if results[line][0] != 0 and len(members) > 1:
            failed += members
        else:
            outcome.update({m: results[line] for m in members})
    if failed:
        outcome.update(dry_runs_of(failed, [folder() for _ in failed], mirror))
    return outcome


def project_copy(folder: Path) -> Path:
    """The project as the pipeline tests copy it, plus examples/ (commands in the docs name its files)."""
    copy_project(folder)
    if (REPO_ROOT / "examples").is_dir():
        shutil.copytree(REPO_ROOT / "examples", folder / "examples")
    return folder


NO_JOBS = {"-n", "--dry-run", "--dryrun", "--unlock", "--lint", "--report", "--list-rules", "--summary"}


def runs_without_cores(command: str) -> bool:
    """A command that runs jobs on this machine without --cores (or a profile setting cores or jobs):
    Snakemake stops it ("cores have to be specified"), which a dry run does not show."""
    words = shlex.split(command)
    if NO_JOBS & set(words) or {"--cores", "-c", "--jobs", "-j"} & set(words):
        return False
    if "--profile" in words:
        profile = REPO_ROOT / words[words.index("--profile") + 1] / "config.yaml"
        return not re.search(r"^(cores|jobs):", profile.read_text(), re.MULTILINE)
    return True


@pytest.fixture(scope="module")
def mirror(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mirror")


@pytest.fixture(scope="module")
def dry_runs(request, tmp_path_factory, mirror) -> dict[str, tuple[int, str]]:
    """Every runnable documented command this session selected, dry-run two at a time, in project
    copies (tests/snakemake_runs.py: Snakemake imported once); commands that differ only in their
    targets share a run (grouped_dry_runs)."""
    selected = {item.callspec.params["command"] for item in request.session.items
                if getattr(item, "callspec", None) and "command" in item.callspec.params}
    runnable = [c for c in COMMANDS if c in selected and not ("profiles/slurm" in c and not SLURM_PLUGIN)
                and not elided(c)]
    return grouped_dry_runs(runnable, lambda: project_copy(tmp_path_factory.mktemp("readme")), mirror)


def elided(command: str) -> bool:
    return "..." in command or "…" in command


def test_the_commands_are_found():
    assert len(COMMANDS) >= 10, COMMANDS
    sample = """Run `snakemake --cores 1 all` or:

```sh
snakemake -n results/x.csv                # what would run
snakemake --cores 2 results/y.csv \\
    --config budget=smoke
CUDA_VISIBLE_DEVICES=1 snakemake --cores 8 all
make smoke
```

    snakemake --profile profiles/slurm all

| a | `snakemake --cores 8 results/y.csv --config budget=reduced` | b |
"""
    assert not runs_without_cores("snakemake -n all") and runs_without_cores("snakemake all")
    assert not runs_without_cores("snakemake --profile profiles/smoke all")
    assert command_lines(sample) == [
        "snakemake --cores 1 all", "snakemake -n results/x.csv", "snakemake --cores 2 results/y.csv --config budget=smoke",
        "CUDA_VISIBLE_DEVICES=1 snakemake --cores 8 all",
        "snakemake --profile profiles/slurm all", "snakemake --cores 8 results/y.csv --config budget=reduced"]
    header = """# The example:
#   snakemake --cores 2 all --configfile x.yaml        every artifact
#   snakemake --profile profiles/smoke results/a.csv \\
#       --configfile y.yaml x.yaml   the table, CPU minutes
# (and then)
key: 1   # snakemake is not a command here
"""
    assert commented_commands(header) == ["snakemake --cores 2 all --configfile x.yaml",
                                          "snakemake --profile profiles/smoke results/a.csv --configfile y.yaml x.yaml"]
    assert any(pages == ["examples/mgu.yaml"] for pages in COMMANDS.values())


def test_a_broken_command_fails(tmp_path, mirror):
    """The check can fail: the README's old form, a target after --config, is refused."""
    broken = "snakemake --cores 8 --config budget=reduced data_mirror=DIR results/tables/pru_table1.csv"
    code, output = dry_runs_of([broken], [project_copy(tmp_path)], mirror)[broken]
    assert code != 0
    assert "Unparsable value: 'results/tables/pru_table1.csv'" in output


@pytest.mark.slow
def test_commands_planned_together_still_fail_one_by_one(tmp_path_factory, mirror):
    """Two commands that differ only in targets and cores share one dry run; where one of them names a
    target no rule makes, the shared run fails and each is judged by a run of its own."""
    good = "snakemake --cores 8 results/tables/pru_table1.csv"
    bad = "snakemake --cores 1 results/tables/pru_no_such_table.csv"
    made = []

    def folder():
        made.append(project_copy(tmp_path_factory.mktemp("grouped")))
        return made[-1]

    results = grouped_dry_runs([good, bad], folder, mirror)
    assert len(made) == 3  # the shared run, then each command alone
    assert results[good][0] == 0, results[good][1][-2000:]
    assert results[bad][0] != 0 and "pru_no_such_table.csv" in results[bad][1]
    assert "pru_no_such_table.csv" not in results[good][1]


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS, ids=[f"{', '.join(pages)}: {c}" for c, pages in COMMANDS.items()])
def test_documented_command_dry_runs(dry_runs, command):
    pages = ", ".join(COMMANDS[command])
    assert not elided(command), f"{pages}: `{command}` is not a command a reader can run (write it out in full)"
    if "profiles/slurm" in command and not SLURM_PLUGIN:
        pytest.skip("snakemake-executor-plugin-slurm (pinned in requirements.txt) is not installed")
    assert not runs_without_cores(command), f"{pages}: `{command}` runs jobs without --cores, which Snakemake refuses"
    code, output = dry_runs[command]
    assert code == 0, f"{pages}: `{command}` fails as a dry run:\n{output[-3000:]}"
    replaced = [line for line in output.splitlines() if line.startswith("[rnnrepro] budget ")]
    assert not replaced, f"{pages}: `{command}` does not run the budget its profile sets: {replaced[0]}"
