"""Realistic wrong answers, one module per chapter topic (``MUTANTS = [...]``).

Each `Mutant` edits the reference answer of one answer cell; the mutation
suite (tests/test_grading.py) grades them all through the real autograder
and requires each to lose points in the test cells it names.
"""

import importlib

from submissions import Mutant


def mutants_for(topic: str) -> list[Mutant]:
    try:
        module = importlib.import_module(f"mutants.{topic}")
    except ModuleNotFoundError:
        return []
    return list(module.MUTANTS)
