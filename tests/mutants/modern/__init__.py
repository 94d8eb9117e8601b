"""Chapter 11's realistic wrong answers, one module per group of exercises."""

from . import attention, costs, model, norm, optim, rope

MUTANTS = norm.MUTANTS + rope.MUTANTS + attention.MUTANTS + optim.MUTANTS + model.MUTANTS + costs.MUTANTS
