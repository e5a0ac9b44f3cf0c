"""The fleet policy: its schema, its loader with located errors, and its resolution into pools."""

from gpufleet.policy.fleet import Fleet, resolve
from gpufleet.policy.load import load_policy, parse_policy
from gpufleet.policy.model import FleetPolicy

__all__ = ["Fleet", "FleetPolicy", "load_policy", "parse_policy", "resolve"]
