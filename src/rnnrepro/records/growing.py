"""``grow``: the next unrecorded units trained through Snakemake, each packed (and committed) as it
finishes.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .. import grid, locks, record_commits
from ..record_checks import stale_copy
from ..configuration import ConfigError
from ..runtime import FILE_TOO_LARGE, GIT_SHA_ENV, file_size_limit_problem
from ..train import progress_file
from .. import tuning

from .paths import RECORDS, record_dir
from .packing import pack_run, pack_speed, packed_files
from .units import Unit, _load, units


# A stopped unit's Snakemake is given this long after the last of its trainers has ended (or after SIGTERM,
# however long training takes to write its checkpoint) before grow kills it (Grower.end_stopped).
STOP_GRACE_SECONDS = 30
STOP_LIMIT_SECONDS = 600


class Grower:
    """The workers of ``grow``: each runs one unit at a time through Snakemake and records it."""

    def __init__(self, budget: str, todo: list[Unit], studies: dict, config: dict, args: argparse.Namespace):
        self.budget, self.todo, self.studies, self.config, self.args = budget, list(todo), studies, config, args
        self.deadline = time.monotonic() + args.minutes * 60
        self.why_stopped = "the deadline"  # or the signal that moved the deadline to now
        self.lock = threading.Lock()
        self.saying = threading.Lock()
        self.running: dict[str, subprocess.Popen] = {}
        self.units = {unit.name: unit for unit in todo}
        self.done: list[str] = []
        self.failed: list[str] = []
        self.interrupted: list[str] = []
        self.busy: list[str] = []  # units another process was training
        self.total = len(todo)
        self.taken = 0  # units handed to a worker so far
        self.log_dir = Path(grid.logs_dir(budget)) / "grow"

    def say(self, text: str) -> None:
        with self.saying:  # the workers' lines, whole and one at a time
            print(f"[rnnrepro] {time.strftime('%H:%M:%S')} {text}", flush=True)

    def snakemake(self, targets: list[str], threads: int, *extra: str) -> list[str]:
        """A Snakemake command line that ends with this process (rnnrepro.process_group): a grow that is
        killed, even with SIGKILL, stops its units as its deadline does, leaving no trainer behind."""
        settings = [f"budget={self.budget}", f"threads={self.args.threads}", *self.args.config]
        custom = ["--configfile", str(self.args.configfile)] if getattr(self.args, "configfile", None) else []
        return [sys.executable, "-m", "rnnrepro.process_group", "--", sys.executable, "-m", "snakemake",
                "--cores", str(threads), *extra, *custom, "--config", *settings, "--", *targets]

    def data_files(self) -> list[str]:
        """The prepared files every cell of the units trains and is evaluated on."""
        files = {}
        for unit in self.todo:
            study = self.studies[unit.study]
            for cell in unit.cells:
                corpus = grid.trained_corpus(study, self.config, cell)
                files.update(dict.fromkeys([grid.train_file(corpus, cell.fraction)] + [
                    f"{grid.PROCESSED}/{corpus}/{name}" for name in ("valid.txt", "test.txt", "vocab.txt")]))
        return list(files)

    def prepare_data(self) -> bool:
        """Fetch and prepare every corpus the units read, in one (locked) Snakemake run, before the
        units' Snakemake runs go side by side."""
        targets = self.data_files()
        if not targets:
            return True
        self.say(f"preparing the data of {len(self.todo)} units")
        log = self.log_dir / "prepare_data.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as out:
            code = subprocess.run(self.snakemake(targets, max(self.args.jobs * self.args.threads, 1)),
                                  stdout=out, stderr=subprocess.STDOUT).returncode
        if code != 0 and (locked := locks.snakemake_lock_problem(log.read_text(errors="replace"))):
            self.say(f"error: preparing the data did not start: {locked}; see {log}")
        elif code != 0:
            self.say(f"error: preparing the data failed (exit {code}); see {log}{why_it_failed(log)}")
        return code == 0

    def next_unit(self) -> tuple[int, Unit] | None:
        """The next unit and its position in the run (taken together: two workers never share one): the
        first whose needs (its tuning cells' units) are recorded, waiting while one of them is running."""
        while True:
            with self.lock:
                if not self.todo or time.monotonic() >= self.deadline:
                    return None
                pending = {u.name for u in self.todo} | set(self.running) | set(self.failed) | set(self.interrupted)
                ready = next((u for u in self.todo if not set(u.needs) & pending), None)
                if ready is not None:
                    self.todo.remove(ready)
                    self.taken += 1
                    return self.taken, ready
                if not set().union(*(set(u.needs) for u in self.todo)) & set(self.running):
                    blocked = self.todo[0]
                    self.say(f"not started: {len(self.todo)} units whose tuning did not finish, e.g. {blocked.name} "
                             f"(needs {', '.join(sorted(set(blocked.needs) & pending)[:2])})")
                    self.todo.clear()
                    return None
            time.sleep(5)

    def record(self, unit: Unit, records: Path) -> list[Path]:
        """Pack the unit; returns exactly the files written (listed first as packed and not committed,
        rnnrepro.record_commits)."""
        files = [f for cell in unit.cells for f in packed_files(Path(cell.run_dir), self.budget, records)]
        if unit.speed:
            files.append(record_dir(records, self.budget) / "speed" / Path(unit.speed).name)
        if self.args.commit:
            record_commits.note_packing(self.budget, files)
        for cell in unit.cells:
            pack_run(Path(cell.run_dir), self.budget, records)
        if unit.speed:
            pack_speed(Path(unit.speed), self.budget, records)
        return files

    def commit(self, unit: Unit, paths: list[Path], summary: str) -> None:
        problem = record_commits.commit(paths, f"records: {self.budget} {unit.name} ({summary})")
        if problem:
            self.say(f"warning: could not commit {unit.name}: {problem}")
        else:
            record_commits.note_committed(self.budget, paths)

    def summary(self, unit: Unit) -> str:
        if unit.speed:
            return "speed benchmark"
        metrics = json.loads(Path(unit.cells[-1].run_dir, "metrics.json").read_text())
        value = next((f"{k} {metrics[k]:.4g}" for k in ("val_ppl", "val_loss", "val_cross_entropy")
                      if isinstance(metrics.get(k), (int, float))), "")
        return f"{value}, trained in {metrics.get('wall_seconds', 0) / 60:.1f} min".lstrip(", ")

    def work(self) -> None:
        while (taken := self.next_unit()) is not None:
            position, unit = taken
            busy = [f"{cell.run_dir} ({who})" for cell in unit.cells
                    if (who := progress_file.another_trainer(Path(cell.run_dir)))]
            if busy:  # its Snakemake would refuse the unit: say why here
                self.busy.append(unit.name)
                self.say(f"skipped {unit.name}: another process on this machine trains {busy[0]}; a later "
                         f"grow records it once that process has ended")
                continue
            for cell in unit.cells:  # a copy of a record gone stale: Snakemake would keep it (record_checks)
                if why := stale_copy(self.studies[unit.study], self.config, cell):
                    shutil.rmtree(cell.run_dir)
                    self.say(f"deleted {cell.run_dir}/, a copy of its record that is stale now ({why}); it trains")
            log = self.log_dir / f"{unit.name.replace('/', '_')}.log"
            started = time.monotonic()
            self.say(f"unit {position} of {self.total}: {unit.name} (log {log})")
            with open(log, "w") as out:
                process = subprocess.Popen(self.snakemake(unit.targets, self.args.threads, "--nolock"),
                                           stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
                with self.lock:
                    self.running[unit.name] = process
                code = process.wait()
                with self.lock:
                    self.running.pop(unit.name, None)
            if code != 0:
                if time.monotonic() >= self.deadline:
                    self.interrupted.append(unit.name)
                    self.say(f"stopped by {self.why_stopped}: {unit.name} (a later grow resumes it); see {log}")
                else:
                    self.failed.append(unit.name)
                    self.say(f"failed (exit {code}): {unit.name}; see {log}{why_it_failed(log)}")
                continue
            try:
                written = self.record(unit, self.args.records)
            except (RuntimeError, FileNotFoundError) as error:  # a run pack refuses (uncommitted code, ...)
                self.failed.append(unit.name)
                self.say(f"failed: {unit.name} trained but is not recorded: {error}")
                continue
            summary = self.summary(unit)
            if self.args.commit:
                self.commit(unit, written, summary)
            self.done.append(unit.name)
            self.say(f"recorded {unit.name}: {summary} (this run of the unit, evaluations included: "
                     f"{(time.monotonic() - started) / 60:.1f} min)")

    def stop_running(self) -> None:
        """SIGTERM to every running unit's process group: training writes its resume checkpoint."""
        with self.lock:
            processes = list(self.running.items())
        for name, process in processes:
            self.say(f"{self.why_stopped}: stopping {name}")
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def end_stopped(self, workers: list[threading.Thread], grace: float = STOP_GRACE_SECONDS,
                    limit: float = STOP_LIMIT_SECONDS) -> None:
        """Wait for the units told to stop. A unit's Snakemake that is still there ``grace`` seconds after
        the last trainer of its cells ended (its resume checkpoint written), or ``limit`` seconds after
        SIGTERM, gets SIGKILL, its whole process group with it: told to stop, Snakemake has been seen to
        sit idle for minutes after its job had ended. A later grow resumes the unit from its checkpoint."""
        told, quiet_since, killed = time.monotonic(), {}, set()
        while any(worker.is_alive() for worker in workers):
            now = time.monotonic()
            with self.lock:
                processes = list(self.running.items())
            for name, process in processes:
                unit = self.units.get(name)
                if name in killed:  # (its worker thread has yet to see it end)
                    continue
                training = bool(unit) and any(progress_file.another_trainer(Path(cell.run_dir)) for cell in unit.cells)
                if training:
                    quiet_since.pop(name, None)
                else:
                    quiet_since.setdefault(name, now)
                waited = now - quiet_since.get(name, now)
                if (training or waited < grace) and now - told < limit:
                    continue
                killed.add(name)
                why = (f"its training still running {now - told:.0f} s after SIGTERM" if training else
                       f"{waited:.0f} s after its training ended ({now - told:.0f} s after SIGTERM)")
                self.say(f"{name}: its Snakemake had not ended {why}: SIGKILL to its process group")
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for worker in workers:
                worker.join(timeout=1)

    def stop_now(self, signum, frame) -> None:
        """SIGTERM or Ctrl-C: the deadline is now (running units checkpoint and stop, none starts)."""
        self.why_stopped = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        self.deadline = time.monotonic()

    def run(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self.stop_now)
        workers = [threading.Thread(target=self.work, daemon=True) for _ in range(self.args.jobs)]
        for worker in workers:
            worker.start()
        while any(worker.is_alive() for worker in workers):
            if time.monotonic() >= self.deadline:
                self.stop_running()
                self.end_stopped(workers)
                break
            time.sleep(2)


FAILED_JOB_LOG = re.compile(r"^\s*log: (.+?) \(check log file\(s\) for error details\)", re.M)


def why_it_failed(snakemake_log: Path, lines: int = 4) -> str:
    """The last lines of the logs of the jobs that failed in a Snakemake run (its own log names them), or
    of the run's log where no job ran (it stopped while planning): shown where the failure is reported,
    so that the error itself is one look away, not two logs deep."""
    try:
        text = snakemake_log.read_text(errors="replace")
    except OSError:
        return ""
    parts = []
    for job_log in dict.fromkeys(FAILED_JOB_LOG.findall(text)):
        try:
            tail = [line for line in Path(job_log).read_text(errors="replace").splitlines() if line.strip()][-lines:]
        except OSError:
            continue
        parts.append(f"{job_log}:\n    " + "\n    ".join(tail))
    if not parts:
        tail = [line for line in text.splitlines() if line.strip() and not line.startswith("  File ")][-lines:]
        parts = ["\n    ".join(tail)] if tail else []
    if FILE_TOO_LARGE.search(text + "".join(parts)):
        parts.insert(0, file_size_limit_problem() or "a file grew past the limit on the size of a file the run "
                     "may write (`ulimit -f` where it ran): raise it (`ulimit -f unlimited`) and run again")
    return "".join(f"\n  {part}" for part in parts)


def selected(found: list[Unit], patterns: list[str] | None) -> list[Unit]:
    """The units whose name matches one of the shell patterns (``--unit``; all without any), in order.
    A pattern that matches no unit is an error naming the units there are."""
    if not patterns:
        return found
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(u.name, p) for u in found)]
    if unmatched:
        names = ", ".join(u.name for u in found[:8]) + (", ..." if len(found) > 8 else "")
        raise ConfigError(f"--unit {', '.join(unmatched)}: matches no unit of this budget and these studies "
                          f"(units are named like {names}; `python -m rnnrepro.records list` lists them)")
    return [u for u in found if any(fnmatch.fnmatchcase(u.name, p) for p in patterns)]


def commit_leftovers(budget: str, records: Path, say) -> None:
    """Commit the files an earlier grow packed into ``records/<budget>`` but was stopped (killed, or the
    session ended) before it could commit, and only those (rnnrepro.record_commits)."""
    record_commits.commit_leftovers(budget, Path(records) / budget, say)


def uncommitted_changes() -> list[str]:
    """Tracked files of the working tree that differ from HEAD (records/ aside: grow commits those). None
    where RNNREPRO_GIT_SHA states the commit (a copy of a clean working tree, train.common.git_sha)."""
    if os.environ.get(GIT_SHA_ENV, "").strip():
        return []
    listed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                             f":(exclude){RECORDS}"], capture_output=True, text=True)
    return [line[3:] for line in listed.stdout.splitlines()] if listed.returncode == 0 else []


def hold_grow_lock(budget: str) -> int:
    """One grow of a budget at a time in a working tree: two would train the same units side by side.
    The lock (``flock`` on ``<logs>/grow/grow.lock``, rnnrepro.locks) lasts as long as this process."""
    return locks.hold(Path(grid.logs_dir(budget)) / "grow" / "grow.lock",
                      f"another `records grow --budget {budget}` runs in this working tree ({{holder}}): wait for "
                      f"it to end, or stop it (it stops its units at the next batch, each resumable), then grow again")


def command_line_settings(words: list[str]) -> dict[str, str]:
    """``--config KEY=VALUE ...`` as a dict (checked with the run config, like Snakemake's ``--config``);
    the budget and the threads have options of their own."""
    settings = {}
    for word in words:
        key, equals, value = word.partition("=")
        if not equals or not key:
            raise ConfigError(f"--config {word}: write KEY=VALUE, e.g. data_mirror=/path/to/mirror")
        if key in ("budget", "threads"):
            raise ConfigError(f"--config {word}: give the {key} with --{key}, not after --config")
        settings[key] = value
    return settings


def grow(args: argparse.Namespace) -> int:
    # every argument is checked here, before any Snakemake run: an error in one is this command's
    config, studies = _load(args.budget, args.run_config, args.study, command_line_settings(args.config),
                            getattr(args, "configfile", None))
    if args.budget == grid.SMOKE:
        raise ConfigError("grow records real-data runs: the smoke budget trains on synthetic corpora")
    hold_grow_lock(args.budget)
    changed = uncommitted_changes()
    if changed:
        raise RuntimeError(f"the working tree has uncommitted changes ({', '.join(changed[:5])}"
                           f"{', ...' if len(changed) > 5 else ''}): a record must name the commit that made "
                           f"it. Commit or stash them, or grow from a clean checkout (git worktree add ../grow)")
    if args.commit:
        record_commits.check_branch()
        commit_leftovers(args.budget, args.records, lambda text: print(f"[rnnrepro] {text}", flush=True))
    pending = seed_by_seed([u for u in selected(units(studies, config), args.unit)
                            if u.problems(studies, config, args.records)])
    grower = Grower(args.budget, pending, studies, config, args)
    grower.say(f"budget {args.budget}: {len(pending)} units to record (studies {', '.join(studies)}), "
               f"{args.jobs} at a time x {args.threads} thread{'' if args.threads == 1 else 's'}, for at most "
               f"{args.minutes:g} minutes")
    if not pending or not grower.prepare_data():
        return 0 if not pending else 1
    grower.run()
    grower.say(f"recorded {len(grower.done)} units, {len(grower.failed)} failed"
               f"{(': ' + ', '.join(grower.failed)) if grower.failed else ''}, {len(grower.interrupted)} stopped "
               f"by {grower.why_stopped}, {len(grower.todo)} not started"
               + (f", {len(grower.busy)} skipped (another process trains them)" if grower.busy else ""))
    return 1 if grower.failed or grower.busy else 0


def seed_by_seed(found: list[Unit]) -> list[Unit]:
    """The order ``grow`` takes units in: study by study, each study's tuning cells first, then its cells
    seed by seed (every model's first seed, then every model's second, ...), its speed benchmark last, so
    that a grow cut short leaves whole comparisons at fewer seeds rather than some models at every seed."""
    studies = list(dict.fromkeys(u.study for u in found))

    def key(unit: Unit) -> tuple:
        tuning_cell = bool(unit.cells) and tuning.parse_variant(unit.cells[-1].model) is not None
        seed = unit.cells[-1].seed if unit.cells else float("inf")
        return studies.index(unit.study), not tuning_cell, seed
    return sorted(found, key=key)
