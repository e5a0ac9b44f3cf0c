"""Output folders: every command that writes one replaces only what gpufleet wrote (gpufleet.outputs).

Each case runs the real command line (``render`` mostly, it is the quickest writer; the other writers
share ``replace_folder`` and get their own cases below and in test_outputs_kill.py).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.demo import run_demo
from gpufleet.ledger.store import Ledger
from gpufleet.outputs import KEPT_SUFFIX, MARKER, State, check, replace_folder, sweep
from gpufleet.trace import write_trace
from tests.simulate.fleets import SERVING_AT_RISK, job
from tests.support import EXAMPLES

runner = CliRunner()
POLICY = EXAMPLES / "tiny.yaml"


def render(out: Path | str, *extra: str) -> tuple[int, str]:
    result = runner.invoke(app, ["render", str(POLICY), "-o", str(out), *extra])
    return result.exit_code, " ".join(result.output.split())


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every path under ``root`` with its bytes (files) or its kind (folders, links): byte-for-byte."""
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[rel] = f"link→{os.readlink(path)}"
        elif path.is_dir():
            found[rel] = "dir"
        else:
            found[rel] = path.read_bytes()
    return found


def rendered(out: Path) -> set[str]:
    """Every path under ``out``, folders included, as the marker lists them."""
    return {p.relative_to(out).as_posix() for p in out.rglob("*")}


def test_a_missing_folder_is_written_with_its_marker(tmp_path: Path) -> None:
    out = tmp_path / "m"
    code, said = render(out)
    assert code == 0, said
    assert "kustomization.yaml" in rendered(out)
    marker = json.loads((out / MARKER).read_text())
    assert marker["tool"] == "gpufleet" and marker["command"] == "render"
    assert set(marker["entries"]) == rendered(out) - {MARKER}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"], "no staging folder left behind"


def test_an_empty_folder_is_replaced(tmp_path: Path) -> None:
    out = tmp_path / "m"
    out.mkdir()
    code, said = render(out)
    assert code == 0, said
    assert "kustomization.yaml" in rendered(out)


def test_an_earlier_output_is_replaced_without_force(tmp_path: Path) -> None:
    out = tmp_path / "m"
    assert render(out)[0] == 0
    (out / "kueue-cohort.yaml").write_text("edited by hand, but a file gpufleet wrote")
    code, said = render(out)
    assert code == 0, said
    assert (out / "kueue-cohort.yaml").read_text() != "edited by hand, but a file gpufleet wrote"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("foreign", "notes.txt"),
        ("earlier output plus a file of the user's", "notes.txt"),
        ("marker copied into a foreign folder", "notes.txt"),
    ],
)
def test_a_foreign_folder_is_refused_and_left_byte_for_byte(tmp_path: Path, case: str, named: str) -> None:
    out = tmp_path / "m"
    if case == "foreign":
        out.mkdir()
        (out / "notes.txt").write_text("keep me")
        (out / "sub").mkdir()
        (out / "sub" / "data.bin").write_bytes(b"\x00\x01")
    elif case.startswith("earlier"):
        assert render(out)[0] == 0
        (out / "notes.txt").write_text("keep me")
    else:
        out.mkdir()
        (out / "notes.txt").write_text("keep me")
        (out / MARKER).write_text(json.dumps({"tool": "gpufleet", "entries": ["kustomization.yaml"]}))
    before = snapshot(tmp_path)
    code, said = render(out)
    assert code == 2
    assert str(out) in said and named in said and "--force" in said
    assert snapshot(tmp_path) == before


def test_the_refusal_names_the_first_entries_in_the_way(tmp_path: Path) -> None:
    out = tmp_path / "m"
    out.mkdir()
    for i in range(8):
        (out / f"f{i}.txt").write_text("x")
    code, said = render(out)
    assert code == 2
    assert "f0.txt, f1.txt, f2.txt, f3.txt, f4.txt and 3 more" in said


def test_force_keeps_a_foreign_folder_beside_the_new_output(tmp_path: Path) -> None:
    out = tmp_path / "m"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    before = snapshot(out)
    code, said = render(out, "--force")
    assert code == 0, said
    kept = tmp_path / f"m{KEPT_SUFFIX}"
    assert str(kept) in said
    assert snapshot(kept) == before
    assert "kustomization.yaml" in rendered(out) and "notes.txt" not in rendered(out)
    # a second forced run on another foreign folder does not overwrite the first one kept
    os.rename(out, tmp_path / "rendered")
    out.mkdir()
    (out / "other.txt").write_text("me too")
    assert render(out, "--force")[0] == 0
    assert snapshot(kept) == before
    assert (tmp_path / f"m{KEPT_SUFFIX}.2" / "other.txt").read_text() == "me too"


def test_a_git_checkout_is_never_replaced_even_with_force(tmp_path: Path) -> None:
    repo = tmp_path / "project"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README").write_text("mine")
    before = snapshot(tmp_path)
    for extra in ((), ("--force",)):
        code, said = render(repo, *extra)
        assert code == 2
        assert ".git" in said
        assert snapshot(tmp_path) == before


@pytest.mark.parametrize("git", [False, True], ids=["plain-folder", "git-checkout"])
@pytest.mark.parametrize("extra", [(), ("--force",)])
def test_the_current_folder_is_never_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: tuple[str, ...], git: bool
) -> None:
    """``render -o .`` in a project folder, a git checkout or not (then only the cwd rule protects it)."""
    project = tmp_path / "project"
    project.mkdir()
    if git:
        subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "fleet.yaml").write_text(POLICY.read_text())
    monkeypatch.chdir(project)
    before = snapshot(tmp_path)
    for target in (".", str(tmp_path)):
        code, said = render(target, *extra)
        assert code == 2
        assert "current folder" in said
        assert snapshot(tmp_path) == before
    assert not git or (project / ".git" / "HEAD").exists()


def test_an_empty_current_folder_is_refused_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, said = render(".")
    assert code == 2
    assert "current folder" in said
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("extra", [(), ("--force",)])
def test_a_regular_file_is_never_replaced(tmp_path: Path, extra: tuple[str, ...]) -> None:
    target = tmp_path / "fleet.out"
    target.write_text("keep me")
    code, said = render(target, *extra)
    assert code == 2
    assert "not a folder (a regular file)" in said
    assert target.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fleet.out"]


@pytest.mark.parametrize("extra", [(), ("--force",)])
def test_a_symlink_is_never_replaced_nor_what_it_points_to(tmp_path: Path, extra: tuple[str, ...]) -> None:
    real = tmp_path / "real"
    assert render(real)[0] == 0  # even a link to gpufleet's own output
    link = tmp_path / "link"
    link.symlink_to(real)
    before = snapshot(tmp_path)
    code, said = render(link, *extra)
    assert code == 2
    assert "symbolic link" in said
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("extra", [(), ("--force",)])
def test_dev_null_is_never_replaced(extra: tuple[str, ...]) -> None:
    """The real /dev/null: only read here (its mode and device number), never written to."""
    before = os.lstat("/dev/null")
    code, said = render("/dev/null", *extra)
    assert code == 2
    assert "not a folder (a character device)" in said
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_rdev, after.st_ino) == (before.st_rdev, before.st_ino)


def test_a_fifo_is_never_replaced(tmp_path: Path) -> None:
    """A special file made in tmp (a FIFO needs no privilege, unlike a device node)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, said = render(fifo, "--force")
    assert code == 2
    assert "not a folder (a FIFO)" in said
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_device_node_in_tmp_is_never_replaced(tmp_path: Path) -> None:
    node = tmp_path / "null"
    try:
        os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD; /dev/null is covered above")
    code, said = render(node, "--force")
    assert code == 2
    assert "a character device" in said
    assert stat.S_ISCHR(os.lstat(node).st_mode)


def test_the_filesystem_root_and_home_are_never_replaced() -> None:
    for path in (Path("/"), Path.home()):
        with pytest.raises(Exception, match="never replaced"):
            check(path, force=True)


def test_states_as_the_rule_names_them(tmp_path: Path) -> None:
    assert check(tmp_path / "new").state is State.MISSING
    (tmp_path / "empty").mkdir()
    assert check(tmp_path / "empty").state is State.EMPTY
    with replace_folder(tmp_path / "ours", "test") as staging:
        (staging / "a").mkdir()
        (staging / "a" / "b.txt").write_text("x")
    assert check(tmp_path / "ours").state is State.OURS
    (tmp_path / "ours" / "a" / "c.txt").write_text("someone else's")  # nested additions count as well
    assert check(tmp_path / "ours", force=True).state is State.FOREIGN


def test_a_failure_while_writing_leaves_the_earlier_output_and_no_staging(tmp_path: Path) -> None:
    out = tmp_path / "m"
    assert render(out)[0] == 0
    before = snapshot(tmp_path)
    with pytest.raises(RuntimeError), replace_folder(out, "render") as staging:
        (staging / "half.yaml").write_text("half")
        raise RuntimeError("disk full")
    assert snapshot(tmp_path) == before


def test_stale_siblings_of_dead_runs_are_swept_and_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "m"
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".m.gpufleet-{dead.pid}-abc123"
    stale.mkdir()
    (stale / MARKER).write_text("{}")
    live = tmp_path / f".m.gpufleet-{os.getpid()}-def456"  # a run still going (this process)
    live.mkdir()
    (live / MARKER).write_text("{}")
    unmarked = tmp_path / f".m.gpufleet-{dead.pid}-ghi789"  # the name, but not gpufleet's content
    unmarked.mkdir()
    (unmarked / "mine.txt").write_text("keep")
    other = tmp_path / f".n.gpufleet-{dead.pid}-abc123"  # another target's
    other.mkdir()
    assert sweep(out) == [stale]
    assert not stale.exists() and live.exists() and unmarked.exists() and other.exists()


def _past(hours_ago: int) -> str:
    end = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=hours_ago)
    return f"{(end - timedelta(hours=1)).isoformat()}..{end.isoformat()}"


@pytest.mark.parametrize("command", ["simulate", "demo", "evidence"])
def test_every_folder_writer_refuses_a_foreign_folder_before_working(tmp_path: Path, command: str) -> None:
    """The folder of the issue: a user's policy and ledger; neither is overwritten nor deleted."""
    work = tmp_path / "inputs"
    work.mkdir()
    policy, trace = work / "fleet.yaml", work / "trace.csv"
    policy.write_text(SERVING_AT_RISK)
    write_trace([job("t1", "a", 0, 600)], trace)
    out = tmp_path / "out"
    out.mkdir()
    (out / "fleet.yaml").write_text("mine")
    (out / "ledger.sqlite").write_bytes(b"SQLite format 3\x00 not gpufleet's")
    before = snapshot(tmp_path)
    args = {
        "simulate": ["simulate", str(policy), "--trace", str(trace)],
        "demo": ["demo"],
        # nothing listens on port 9: the refusal must come before any query
        "evidence": ["evidence", "--prometheus", "http://127.0.0.1:9", "--before", _past(3), "--after", _past(1)],
    }[command]
    result = runner.invoke(app, [*args, "-o", str(out)])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert "gpufleet did not write" in said and "fleet.yaml, ledger.sqlite" in said
    assert snapshot(tmp_path) == before


def test_an_output_folder_and_its_files_get_the_umask_modes(tmp_path: Path) -> None:
    """Not mkstemp's and mkdtemp's 0600/0700: a report is written to be shared."""
    policy, trace = tmp_path / "fleet.yaml", tmp_path / "trace.csv"
    policy.write_text(SERVING_AT_RISK)
    write_trace([job("t1", "a", 0, 600)], trace)
    out = tmp_path / "sim"
    mask = os.umask(0o022)
    try:
        result = runner.invoke(app, ["simulate", str(policy), "--trace", str(trace), "-o", str(out)])
    finally:
        os.umask(mask)
    assert result.exit_code == 0, result.output
    modes = {p.relative_to(out).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in [out, *out.rglob("*")]}
    assert modes == {k: (0o755 if (out / k).is_dir() else 0o644) for k in modes}


def test_demo_replaces_its_own_folder_with_a_fresh_ledger_and_marks_its_subfolders(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    first = run_demo(out, days=1)
    with Ledger.open(str(first.ledger)) as ledger:
        count = len(list(ledger.entries()))
    assert count > 0
    second = run_demo(out, days=1)
    with Ledger.open(str(second.ledger)) as ledger:
        assert len(list(ledger.entries())) == count, "a fresh ledger, not the old one appended to"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]
    for sub, command in (("manifests", "render"), ("simulation", "simulate")):
        assert json.loads((out / sub / MARKER).read_text())["command"] == command
    assert check(out).state is State.OURS
    assert render(out / "manifests")[0] == 0, "the demo's manifests are gpufleet's to re-render"
