"""Allow ``python -m gpufleet``."""

from gpufleet.cli import main

main()
