"""Inside the grading sandbox: PyTorch never runs more threads than the machine has cores.

The sandbox's process limit counts threads (`autograder.sandbox.PROCESSES`). A notebook that
asks for more intra-op threads than the grading machine has cores
(``torch.set_num_threads(64)``, written for a bigger machine) would start them all, in two
pools (about twice as many threads), and its kernel would die at that limit. Capped at the
cores, it keeps its kernel and loses nothing: threads beyond the cores would only wait. The
grader starts every sandboxed kernel with `cap_threads()`; nothing else calls it.
"""

from __future__ import annotations

import os


def cap_threads() -> None:
    """Make ``torch.set_num_threads(n)`` set at most as many threads as this process may use cores."""
    import torch

    cores = len(os.sched_getaffinity(0))
    set_at_most = torch.set_num_threads

    def set_num_threads(n: int) -> None:
        set_at_most(max(1, min(int(n), cores)))

    set_num_threads.__doc__ = set_at_most.__doc__
    torch.set_num_threads = set_num_threads
