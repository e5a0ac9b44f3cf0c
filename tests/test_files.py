"""Atomic file writes (gpufleet.files): only a regular file is ever replaced, and modes are kept."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpufleet.cli import app
from gpufleet.errors import InputError
from gpufleet.files import write_text
from gpufleet.trace import write_trace
from tests.simulate.fleets import job

runner = CliRunner()


def _folder(p: Path) -> None:
    p.mkdir()
    (p / "keep.txt").write_text("keep")


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _link(p: Path) -> None:
    (p.parent / "real.csv").write_text("the link's target")
    p.symlink_to(p.parent / "real.csv")


def _device(p: Path) -> None:
    try:
        os.mknod(p, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD; /dev/null is checked read-only below")


@pytest.mark.parametrize(
    ("make", "kind"),
    [(_folder, "a folder"), (_fifo, "a FIFO"), (_link, "a symbolic link"), (_device, "a character device")],
    ids=["folder", "fifo", "symlink", "device"],
)
def test_something_other_than_a_regular_file_is_never_replaced(
    tmp_path: Path, make: Callable[[Path], None], kind: str
) -> None:
    target = tmp_path / "out.csv"
    make(target)
    before = os.lstat(target)
    source = tmp_path / "in.csv"
    write_trace([job("t1", "a", 0, 60)], source)
    result = runner.invoke(app, ["trace", "convert", str(source), "-o", str(target)])
    assert result.exit_code == 2
    assert f"exists and is {kind}" in " ".join(result.output.split())
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temporary file left"
    if kind == "a symbolic link":
        assert (tmp_path / "real.csv").read_text() == "the link's target"


def test_dev_null_is_never_replaced() -> None:
    before = os.lstat("/dev/null")
    with pytest.raises(InputError, match="a character device"):
        write_text(Path("/dev/null"), "x")
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def test_a_new_file_gets_the_umask_mode_and_a_replaced_one_keeps_its_mode(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.yaml"
        write_text(fresh, "a")
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
        fresh.chmod(0o640)
        write_text(fresh, "b")
        assert fresh.read_text() == "b"
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o640
    finally:
        os.umask(mask)
