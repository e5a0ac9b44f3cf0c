"""The command line's shared behaviour."""

from typer.testing import CliRunner

from gpufleet import __version__
from gpufleet.cli import app

runner = CliRunner()


def test_version_prints_the_package_version() -> None:
    result = runner.invoke(app, ["version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == __version__
