"""SIGINT and SIGTERM at any moment of `plan` and `plan scenario` (issue 39): one line, exit 130 or
143, no traceback, nothing left behind: no file in the working or temporary folder, no worker
process (planner/commands/signals.py). The moments fall in the start-up, the candidate sweep (a
review of 40 services sweeps in worker processes) and the solve; a run that ends before its
signal answers as usual."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVICES = 40
# counted from when the command catches SIGTERM (`_handling`)
MOMENTS = [(0.0, signal.SIGTERM), (0.3, signal.SIGINT), (0.7, signal.SIGTERM), (1.2, signal.SIGINT)]


def _review(folder: Path) -> Path:
    from bench.reviews import free_inventory, render, services

    listed = services(SERVICES)
    path = folder / "signalled-review.yaml"
    path.write_text(render("signalled", listed, free_inventory(listed)))
    return path


def _handling(process: subprocess.Popen, within: float = 60.0) -> None:
    """Wait until the command catches SIGTERM (its /proc status's SigCgt mask: planner/cli.py installs
    the handlers from its first imports; Python alone catches only SIGINT), so that the moments are
    counted from there, not from an interpreter start that a loaded machine makes slow."""
    bit = 1 << (signal.SIGTERM - 1)
    end = time.monotonic() + within
    while time.monotonic() < end and process.poll() is None:
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
        except OSError:
            return
        caught = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), 0)
        if caught & bit:
            return
        time.sleep(0.01)


def _survivors(marker: str) -> list[str]:
    """Processes whose command line names `marker` (a worker forked from the command keeps its parent's)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and proc.name != str(os.getpid()):
            try:
                if marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(proc.name)
            except OSError:
                continue
    return found


@pytest.mark.parametrize("command", ["scenario", "plan"])
def test_a_signal_at_any_moment_of_planning_is_one_line_and_128_plus_the_signal(tmp_path, command):
    work, temp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    temp.mkdir()
    review = _review(tmp_path)
    argv = (["scenario", str(review)] if command == "scenario" else
            ["--model", "dsv4.1-flash", "--chip", "h200", "--chip", "b200", "--chip", "h100", "--concurrency",
             "64", "--context-length", "32768", "--json"])
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(ROOT)}
    interrupted = 0
    for moment, signum in MOMENTS:
        process = subprocess.Popen([sys.executable, "-m", "planner.cli", *argv], cwd=work, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _handling(process)
        time.sleep(moment)
        process.send_signal(signum)
        _, err = process.communicate(timeout=120)
        if process.returncode == 0:  # it answered before the signal came
            continue
        interrupted += 1
        assert process.returncode == 128 + signum, (moment, process.returncode, err[-2000:])
        assert err == f"plan: stopped by {signal.Signals(signum).name}\n", (moment, err[-2000:])
        assert list(work.iterdir()) == [] and list(temp.iterdir()) == [], (moment, list(temp.iterdir()))
        assert _survivors(str(review)) == [], moment
    assert interrupted >= 2


def test_a_signal_python_wraps_on_its_way_out_is_still_one_line(monkeypatch, capsys):
    """A signal that lands while a class body runs `__set_name__` (a module imported mid-command)
    reaches the command as a RuntimeError caused by the handler's Interrupted: still one line and
    128 + the signal, no traceback (the fresh-clone CI run met it importing planner/report/html.py)."""
    from planner import cli
    from planner.report.atomic import Interrupted

    class Raises:
        def __set_name__(self, owner, name):
            raise Interrupted(128 + signal.SIGTERM)

    def command(*args, **kwargs):
        type("Made", (), {"field": Raises()})  # Python wraps the Interrupted in a RuntimeError

    monkeypatch.setattr(cli.cli, "main", command)
    assert cli.main(["--help"]) == 128 + signal.SIGTERM
    assert capsys.readouterr().err == "plan: stopped by SIGTERM\n"
