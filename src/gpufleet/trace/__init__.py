"""Traces: gpufleet's native job format, the Alibaba GPU trace loader, and the synthetic generator."""

from gpufleet.trace.job import Job, JobKind
from gpufleet.trace.native import read_trace, write_trace
from gpufleet.trace.spec_file import load_spec
from gpufleet.trace.synth import PoolSpec, Slicing, SynthSpec, TeamSpec, synthesize

__all__ = [
    "Job",
    "JobKind",
    "PoolSpec",
    "Slicing",
    "SynthSpec",
    "TeamSpec",
    "load_spec",
    "read_trace",
    "synthesize",
    "write_trace",
]
