"""Issue 39, atomic output: `--emit k8s -o DIR`, `--chart` and `calibrate --out` replace their
target whole or not at all (planner/report/atomic.py). The signal tests start real `plan scenario
... --emit k8s -o DIR` processes of a 500-service scenario and interrupt them at chosen moments of
the write (DEPLOYMENT_PLANNER_TEST_SLOW_WRITES slows each file so that the moments can be hit)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from planner.cli import main
from planner.report.atomic import SLOW_WRITES

ROOT = Path(__file__).resolve().parents[1]
SERVICES = 500
PLAN_8B = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "8", "--context-length", "8192"]


def many_services(path: Path, names: list[str] | None = None) -> Path:
    names = names or [f"s{i}" for i in range(SERVICES)]
    lines = ["review: many", "services:"] + [
        f"  - {{name: {n!r}, model: llama-3.1-8b, concurrency: 8, context_length: 8192, chips: [h100]}}"
        for n in names]
    path.write_text("\n".join(lines) + "\n")
    return path


def old_folder(folder: Path) -> dict[str, str]:
    folder.mkdir()
    (folder / "old.yaml").write_text("kind: Old\n")
    return {"old.yaml": "kind: Old\n"}


def contents(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def complete(files: dict[str, str], namespace: str | None = None) -> bool:
    """The whole new set: one file per service, each a Deployment and a Service (in `namespace`)."""
    if sorted(files) != sorted(f"s{i}.yaml" for i in range(SERVICES)):
        return False
    for text in files.values():
        resources = list(yaml.safe_load_all(text))
        if [r["kind"] for r in resources] != ["Deployment", "Service"]:
            return False
        if namespace and {r["metadata"].get("namespace") for r in resources} != {namespace}:
            return False
    return True


def emit_process(scenario: Path, out: Path, *extra: str, slow: float = 0.003) -> subprocess.Popen:
    env = os.environ | {SLOW_WRITES: str(slow)}
    command = [sys.executable, "-m", "planner.cli", "scenario", str(scenario), "--format", "json", "--emit", "k8s",
               "-o", str(out), *extra]
    err = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: a run that says much never blocks on it
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
    process.err = err
    return process


def said(process: subprocess.Popen) -> str:
    """What a finished `emit_process` printed on stderr."""
    process.err.seek(0)
    return process.err.read()


def others(parent: Path, out: Path) -> list[Path]:
    """What stands beside `out` in its folder (temporary parts, lock files)."""
    return [p for p in parent.iterdir() if p.name != out.name and p.suffix != ".yaml"]


def _files_in(part: Path) -> int:
    try:
        return len(os.listdir(part))
    except OSError:
        return 0


def interrupt_at(process: subprocess.Popen, parent: Path, out: Path, moment: int | None, signum: int) -> None:
    """Send `signum` once a temporary folder beside `out` holds `moment` files (None: while planning,
    before anything is written)."""
    if moment is None:
        time.sleep(0.3)
    else:
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            parts = [p for p in others(parent, out) if p.is_dir()]
            if parts and max(_files_in(p) for p in parts) >= moment:
                break
            time.sleep(0.01)
    process.send_signal(signum)


MOMENTS = [(None, signal.SIGTERM), (1, signal.SIGINT), (250, signal.SIGTERM), (SERVICES, signal.SIGINT)]


def test_a_signal_at_any_moment_leaves_the_folder_as_it_was_or_complete(tmp_path):
    """Done when: SIGINT and SIGTERM at any moment of a 500-manifest emit leave DIR either as it
    was or complete, and no temporary folder or lock file beside it; interrupted while writing, the
    process exits 128 + the signal (130, 143). The runs go side by side, each into its own DIR."""
    scenario = many_services(tmp_path / "many.yaml")
    runs = []
    for n, (moment, signum) in enumerate(MOMENTS):
        parent = tmp_path / f"run{n}"
        parent.mkdir()
        out = parent / "out"
        before = old_folder(out)
        runs.append((moment, signum, parent, out, before, emit_process(scenario, out)))
    for moment, signum, parent, out, _, process in runs:
        interrupt_at(process, parent, out, moment, signum)
    for moment, signum, parent, out, before, process in runs:
        code = process.wait(timeout=120)
        after = contents(out)
        assert after == before or complete(after), (moment, signum, sorted(after)[:5])
        assert others(parent, out) == [], (moment, signum, others(parent, out))
        if moment is not None and moment < SERVICES:  # interrupted while writing: the old folder, 128 + signal
            assert after == before and code == 128 + signum, (moment, signum, code, said(process))
        else:
            assert code != 0 or complete(after)


def test_two_emits_into_one_folder_take_turns(tmp_path):
    """Done when: two concurrent emits into one DIR leave one complete set: the second waits on the
    first's lock (never two temporary folders at once), both exit 0."""
    scenario = many_services(tmp_path / "many.yaml")
    parent = tmp_path / "shared"
    parent.mkdir()
    out = parent / "out"
    a = emit_process(scenario, out, "--namespace", "team-a", slow=0.002)
    b = emit_process(scenario, out, "--namespace", "team-b", slow=0.002)
    most = 0
    while a.poll() is None or b.poll() is None:
        most = max(most, len([p for p in others(parent, out) if p.is_dir()]))
        time.sleep(0.01)
    assert (a.returncode, b.returncode) == (0, 0), (said(a), said(b))
    after = contents(out)
    assert complete(after, "team-a") or complete(after, "team-b")
    assert most == 1 and others(parent, out) == []


def test_old_files_do_not_stay_beside_the_new_ones(tmp_path, capsys):
    """Issue 39: old files in DIR stayed beside the new ones; the folder is replaced whole."""
    out = tmp_path / "out"
    old_folder(out)
    assert main([*PLAN_8B, "--emit", "k8s", "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["llama-3-1-8b.yaml"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    capsys.readouterr()
    assert main(["--help"]) == 0
    assert "replaced whole (created; files in it from before do not stay beside the new ones)" in " ".join(
        capsys.readouterr().out.split())


def test_a_folder_that_is_not_the_tools_to_replace_is_refused(tmp_path, capsys, monkeypatch):
    """The folder is replaced whole, so one holding anything but .yaml files, or the working folder
    (or one above it), is refused before planning and left as it was, never removed."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    (mine / "sub").mkdir()
    assert main([*PLAN_8B, "--emit", "k8s", "-o", str(mine)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"plan: error: -o: {mine} holds notes.txt, sub, not manifests, and the folder is replaced whole "
                   "(name a folder of its own for the manifests (a new one, or one holding only .yaml files))"]
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt", "sub"]
    monkeypatch.chdir(mine / "sub")
    for here in (".", "..", str(tmp_path)):
        assert main([*PLAN_8B, "--emit", "k8s", "-o", here]) == 2
        assert capsys.readouterr().err.startswith(f"plan: error: -o: {here} is the working folder or holds it")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


@pytest.mark.skipif(os.geteuid() != 0 and not os.path.isdir("/sys/kernel"), reason="needs /sys")
def test_an_unwritable_target_is_one_line_naming_o(tmp_path, capsys):
    """Issue 39: `--emit k8s -o /sys/kernel/foo` was a PermissionError traceback."""
    assert main([*PLAN_8B, "--emit", "k8s", "-o", "/sys/kernel/foo"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("plan: error: -o: cannot write") and "(name a" in err[0]
    assert not Path("/sys/kernel/foo").exists()


def test_a_full_disk_is_one_line_and_the_folder_as_it_was(tmp_path, capsys, monkeypatch):
    """Issue 39: a full disk was an OSError traceback; now one line naming -o, exit 2, DIR as it was."""
    out = tmp_path / "out"
    before = old_folder(out)
    real = Path.write_bytes
    calls = []

    def full(self, data):
        calls.append(self)
        if len(calls) == 1:
            real(self, data[:10])
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full)
    assert main([*PLAN_8B, "--emit", "k8s", "-o", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("plan: error: -o: cannot write ") and "No space left" in err[0]
    assert contents(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_names_that_collide_after_sanitising_are_refused_before_any_write(tmp_path, capsys):
    """Issue 39: services chat_a, chat-a and Chat.A wrote one chat-a.yaml (two lost, exit 0)."""
    scenario = many_services(tmp_path / "s.yaml", ["chat_a", "chat-a", "Chat.A", "other"])
    out = tmp_path / "out"
    assert main(["scenario", str(scenario), "--emit", "k8s", "-o", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "'chat_a', 'chat-a', 'Chat.A'" in err[0] and "chat-a.yaml" in err[0]
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_a_name_a_service_cannot_take_is_refused(tmp_path, capsys):
    """A Service's name begins with a letter (DNS-1035): a service `70b` is refused, not written."""
    scenario = many_services(tmp_path / "s.yaml", ["70b"])
    assert main(["scenario", str(scenario), "--emit", "k8s", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "'70b' is '70b' as a Kubernetes name, which a Service cannot take" in err[0]
    assert not (tmp_path / "out").exists()


def test_calibrate_out_is_replaced_whole(tmp_path, capsys, monkeypatch):
    """`plan calibrate --out` a folder was a traceback; a failure half-way leaves the old overlay."""
    records = ROOT.parent / "shared" / "calibration"
    jsonl = sorted(records.glob("*.jsonl"))
    if not jsonl:
        pytest.skip("no calibration records in ../shared")
    folder = tmp_path / "a-folder"
    folder.mkdir()
    assert main(["calibrate", str(jsonl[0]), "--out", str(folder)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("plan: error: --out: ") and "is a folder" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-folder"] and list(folder.iterdir()) == []
