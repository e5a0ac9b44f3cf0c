"""The command line's shared behaviour."""

from typer.testing import CliRunner

from gpufleet import __version__
from gpufleet.cli import app

runner = CliRunner()


def test_version_prints_the_package_version() -> None:
    result = runner.invoke(app, ["version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == __version__


def test_the_command_line_starts_without_the_libraries_only_reports_and_traces_need() -> None:
    """matplotlib and polars were a second of every command's start-up (`--version`, `webhook
    serve`); they load when a chart is drawn or a trace read. Checked in a fresh interpreter,
    by what it imported, not by a time."""
    import subprocess
    import sys

    probe = "import sys, gpufleet.cli; print(' '.join(m for m in ('matplotlib', 'polars') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []
