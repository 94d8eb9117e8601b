"""Probes for chapter 0: the warm-up exercise on the row-vector convention."""

from __future__ import annotations

from ..runner import Probe, register

register(Probe("introduction.linear_rows", forbid=("torch.nn.functional.linear",)))
