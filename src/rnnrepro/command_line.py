"""What the ``snakemake`` command line of this process asks for: its targets, its profiles and their
budget, and the same command for other targets or another budget.

Snakemake 9 hands the workflow neither its targets nor its profiles while the Snakefile is parsed (the
DAG settings arrive afterwards), so they are read from the command line the way Snakemake itself reads
it: its own argument parser, with the profiles (``--profile``, ``SNAKEMAKE_PROFILE``, the workflow
profile ``profiles/default``) applied. Where the process is not the ``snakemake`` program (Snakemake
driven from Python), there is no command line to read and every function says so (None).
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import sys
from functools import lru_cache
from pathlib import Path

import yaml


def is_snakemake(argv: list[str]) -> bool:
    program = Path(argv[0]) if argv else Path()
    return program.name == "snakemake" or program.parts[-2:] == ("snakemake", "__main__.py")


@lru_cache(maxsize=4)
def _parsed(argv: tuple[str, ...], folder: str):
    """Snakemake's reading of ``argv`` in ``folder`` (the profiles are found from the working folder)."""
    from snakemake.cli import parse_args

    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            _, args = parse_args(list(argv))  # it announces the profiles it reads: Snakemake did already
    except (Exception, SystemExit):
        return None
    return args


def snakemake_arguments(argv: list[str] | None = None):
    """The parsed arguments of the ``snakemake`` command line ``argv`` (default: this process's), with
    its profiles applied; None when it is not the snakemake program or does not parse."""
    argv = sys.argv if argv is None else argv
    if not is_snakemake(argv):
        return None
    return _parsed(tuple(argv[1:]), os.getcwd())


def requested_targets(argv: list[str] | None = None) -> list[str] | None:
    """The targets (files and rule names) the command line asks for; None without a command line."""
    args = snakemake_arguments(argv)
    return None if args is None else list(args.targets or [])


def builds_report(argv: list[str] | None = None) -> bool:
    """Whether the command builds a report (``--report``); True without a command line to read."""
    args = snakemake_arguments(argv)
    return args is None or bool(getattr(args, "report", None))


# options whose values name rules or files, like targets
JOB_OPTIONS = {"forcerun": "--forcerun", "until": "--until", "omit_from": "--omit-from", "prioritize": "--prioritize"}


def named_jobs(argv: list[str] | None = None) -> dict[str, list[str]]:
    """The rules and files the command line names in --forcerun, --until, --omit-from and --prioritize."""
    args = snakemake_arguments(argv)
    if args is None:
        return {}
    return {option: sorted(getattr(args, key, None) or []) for key, option in JOB_OPTIONS.items()
            if getattr(args, key, None)}


def _profile_settings(profile: Path) -> dict:
    """A profile's config.yaml, or an empty dict where there is none to read."""
    try:
        settings = yaml.safe_load((profile / "config.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return settings if isinstance(settings, dict) else {}


def _budget_in(path: Path) -> str | None:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    budget = data.get("budget") if isinstance(data, dict) else None
    return budget if isinstance(budget, str) else None


def profile_budget(argv: list[str] | None = None) -> tuple[str, str, list[str]] | None:
    """The budget the command line's profile sets: (profile, budget, the config files through which it
    sets it), from the last ``--profile`` whose ``configfile:`` or ``config:`` names a budget. None
    where no profile sets one (or there is no command line)."""
    args = snakemake_arguments(argv)
    if args is None or not args.profile:
        return None
    found = None
    for name in args.profile:
        profile = Path(name)
        if not profile.is_dir() and (Path("profiles") / name).is_dir():
            profile = Path("profiles") / name
        settings = _profile_settings(profile)
        files = settings.get("configfile") or []
        files = [files] if isinstance(files, str) else list(files)
        for file in files:
            budget = _budget_in(profile / file)
            if budget:
                found = (str(profile), budget, [str(profile / file)])
        config = settings.get("config") or {}
        words = config.items() if isinstance(config, dict) else (str(w).split("=", 1) for w in config)
        for key, *value in words:
            if key == "budget" and value:
                found = (str(profile), str(value[0]), [])
    return found


def replaced_budget(budget: str, source: str, argv: list[str] | None = None) -> str | None:
    """Where the run config's ``budget`` is not the one the command's profile sets: which budget the
    profile sets and what replaced it (``--config budget=``, or a ``--configfile`` given in place of the
    profile's, with the fix); None where they agree, or no profile sets a budget. ``source``: the config
    files the run config was read from, as the workflow names them."""
    profile = profile_budget(argv)
    if profile is None or profile[1] == budget:
        return None
    name, profile_budget_, files = profile
    given = configfiles(argv)
    if f"budget={budget}" in (snakemake_arguments(argv).config or []):
        why = f"--config budget={budget}"
    elif files and not set(files) <= set(given):
        why = (f"--configfile {' '.join(given)} replaced the profile's {', '.join(files)}; to keep "
               f"{profile_budget_}, give both: --configfile {' '.join(files + given)}")
    else:
        why = f"set by {source}"
    return f"not {profile_budget_} as {name} sets ({why})"


def named_config_files(argv: list[str] | None = None) -> list[Path]:
    """The config files a command line names: after ``--configfile`` (until the next option), and the
    ``configfile:`` of each ``--profile``. Read from the words alone: this runs while Snakemake reads
    its profiles (profiles/default), where its own parser cannot be asked again."""
    argv = sys.argv if argv is None else argv
    files, profiles, option = [], [], None
    for word in argv[1:]:
        name, equals, value = word.partition("=")
        if word.startswith("-"):
            option = name if name in ("--configfile", "--configfiles", "--profile") else None
            if not equals or option is None:
                continue
            word = value
        if option in ("--configfile", "--configfiles"):
            files.append(Path(word))
        elif option == "--profile":
            profiles.append(Path(word))
            option = None
    for profile in profiles:
        if not profile.is_dir() and (Path("profiles") / profile).is_dir():
            profile = Path("profiles") / profile
        named = _profile_settings(profile).get("configfile") or []
        files += [profile / name for name in ([named] if isinstance(named, str) else named)]
    return files


def stop_on_unreadable_config_files(argv: list[str] | None = None) -> None:
    """Exit with one message per config file of the command line that is missing, not valid YAML (its
    line and column), empty or not a mapping of keys, before Snakemake reads them: its own messages name
    neither the file nor the line of a YAML mistake, and a missing file ends in a traceback. The workflow
    profile (profiles/default) calls this."""
    from .configuration import ConfigError, load_config_file as load_yaml

    mistakes = []
    for path in named_config_files(argv):
        if not path.is_file():
            what = "is a folder" if path.is_dir() else "does not exist"
            mistakes.append(f"[rnnrepro] error: config file {path} {what} (paths are read from {Path.cwd()}; "
                            f"--configfile takes every word up to the next option: put targets before it)")
            continue
        try:
            load_yaml(path)
        except ConfigError as error:
            mistakes.append(f"[rnnrepro] error: {error}")
    if mistakes:
        sys.exit("\n".join(mistakes))


def configfiles(argv: list[str] | None = None) -> list[str]:
    """The config files the command line (with its profiles) gives, as it names them."""
    args = snakemake_arguments(argv)
    return [] if args is None else [str(path) for path in args.configfile or []]


def command_for(targets: list[str], budget: str, argv: list[str] | None = None) -> str:
    """The command line of this process for other ``targets`` at ``budget``: the targets, then its own
    options (without its targets), ``budget=`` set after ``--config``; for the smoke budget, a command without a
    profile gets profiles/smoke instead (it sets the budget and the CPU settings). Without a command
    line: ``snakemake --cores 2``."""
    argv = sys.argv if argv is None else argv
    args = snakemake_arguments(argv)
    words = ["--cores", "2"]
    if args is not None:
        words = list(argv[1:])
        if "--" in words:  # the targets after it
            words = words[:words.index("--")]
        words = [word for word in words if word not in set(args.targets or [])]
    # --config takes every word after it: its settings go last, without the old budget=
    settings, rest, in_config = [], [], False
    for word in words:
        if word == "--config":
            in_config = True
        elif in_config and not word.startswith("-"):
            settings += [] if word.startswith("budget=") else [word]
        else:
            in_config = False
            rest.append(word)
    if budget == "smoke" and (args is None or not args.profile):
        cores = [i for i, word in enumerate(rest) if word in ("--cores", "-c")]
        rest = ["--profile", "profiles/smoke",
                *[word for i, word in enumerate(rest) if i not in cores and i - 1 not in cores]]
    else:
        settings.append(f"budget={budget}")
    # targets first: an option of the command that takes a list (--forcerun A B) would take them
    return shlex.join(["snakemake", *targets, *rest] + (["--config", *settings] if settings else []))
