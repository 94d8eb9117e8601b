"""Checks for chapter 10: teacher-forcing inputs and targets, the padded label-smoothed
cross-entropy, the learning-rate schedule, a training step with gradient clipping, the evaluation
loop and BERT's masked-token inputs.

Oracles are PyTorch's own where one exists (``F.cross_entropy`` with probability targets,
``torch.nn.utils.clip_grad_norm_`` and the same optimizer on a copy of the model) and otherwise
short independent computations written here: the targets as Python lists, the schedule from its
formula, the evaluation loss from the per-batch losses, and for the random masking the properties
the contract promises (which positions may change, to what, and how often).

One module per exercise group: `data` (10.1 teacher forcing, 10.6 masked tokens), `loss`
(10.2 cross-entropy), `optimisation` (10.3 schedule, 10.4 training step, 10.5 evaluation).
The kernel's half of each check (how the student's function is called, the probe network, the
masking draws) is in `course.probing.calls.training`.
"""

from . import data, loss, optimisation

__all__ = ["data", "loss", "optimisation"]
