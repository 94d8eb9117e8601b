"""Answers that do no work, made from any answer cell's reference (the fairness rule: they earn nothing).

`degenerate_answers(source)` turns the reference answer of one answer cell into a family of answers
that keep its names and signatures but do none of its work:

* ``raise ValueError`` / ``raise TypeError``: every function and method, ``__init__`` included, raises;
* ``None``, ``input``, ``clone``: every function and method (``__init__`` aside) returns None, its first
  argument, or a copy of it: a module whose forward returns its input, an optimizer whose step does
  nothing, a generator that returns the prompt;
* ``zeros``, ``ones``, ``random``: the same, returning values of the right shape and dtype (the
  reference's output, computed on copies of the arguments and thrown away, replaced by zeros, ones or
  random values).

Classes keep the reference's ``__init__`` when they are ``nn.Module``s or optimizers (their parameters
and groups are bookkeeping, not the exercise's work); any other class's ``__init__`` only keeps its
arguments, and builds a reference object when a method needs an output's shape. Dataclasses stay as
they are (they do nothing).
"""

from __future__ import annotations

import ast
import copy
import random as _random
from typing import Any

import torch

KINDS = ("raise ValueError", "raise TypeError", "None", "input", "clone", "zeros", "ones", "random")
RUNTIME = "from degenerate import first_argument as _first, like as _like, reference_output as _reference_output"


def first_argument(args: tuple, kwargs: dict) -> Any:
    """A call's first argument (after self), or None."""
    return args[0] if args else next(iter(kwargs.values()), None)


def like(value: Any, kind: str) -> Any:
    """`value` with every number and tensor replaced by zeros, ones or random values (same shapes and dtypes);
    "clone" copies it."""
    if kind == "clone":
        return value.clone() if isinstance(value, torch.Tensor) else copy.deepcopy(value)
    if isinstance(value, torch.Tensor):
        if kind == "zeros":
            return torch.zeros_like(value)
        if kind == "ones":
            return torch.ones_like(value)
        if value.dtype == torch.bool:
            return torch.rand(value.shape) < 0.5
        if value.is_floating_point() or value.is_complex():
            return torch.randn_like(value)
        return torch.randint_like(value, 0, max(2, int(value.max()) + 1 if value.numel() else 2))
    if isinstance(value, bool):
        return {"zeros": False, "ones": True}.get(kind, _random.random() < 0.5)
    if isinstance(value, int):
        return {"zeros": 0, "ones": 1}.get(kind, _random.randrange(0, 100))
    if isinstance(value, float):
        return {"zeros": 0.0, "ones": 1.0}.get(kind, _random.gauss(0.0, 1.0))
    if isinstance(value, str):
        return {"zeros": "", "ones": "1"}.get(kind, "".join(_random.choice("ab ") for _ in value))
    if isinstance(value, (list, tuple)):
        items = [like(v, kind) for v in value]
        return type(value)(items) if not hasattr(value, "_fields") else type(value)(*items)
    if isinstance(value, dict):
        return {k: like(v, kind) for k, v in value.items()}
    return value


def reference_output(method: Any, owner: Any, args: tuple, kwargs: dict) -> Any:
    """What the reference `method` returns on copies of the arguments (and of `owner`, its object, or
    None for a function): its side effects fall on the copies."""
    args, kwargs = copy.deepcopy(args), copy.deepcopy(kwargs)
    if owner is None:
        return method(*args, **kwargs)
    return method(copy.deepcopy(owner), *args, **kwargs)


def _body(kind: str, call: str, owner: str) -> list[ast.stmt]:
    """The statements of a degenerate function or method (``*args, **kwargs``)."""
    if kind.startswith("raise"):
        return ast.parse(f"raise {kind.split()[1]}('this answer does no work')").body
    if kind == "None":
        return ast.parse("return None").body
    if kind == "input":
        return ast.parse("return _first(args, kwargs)").body
    if kind == "clone":
        return ast.parse("return _like(_first(args, kwargs), 'clone')").body
    return ast.parse(f"return _like(_reference_output({call}, {owner}, args, kwargs), {kind!r})").body


def _function(name: str, body: list[ast.stmt], with_self: bool = False) -> ast.FunctionDef:
    params = "self, *args, **kwargs" if with_self else "*args, **kwargs"
    node = ast.parse(f"def {name}({params}):\n    pass").body[0]
    node.body = body
    return node


def _keeps_init(cls: ast.ClassDef) -> bool:
    bases = {ast.unparse(b) for b in cls.bases}
    return any(b.endswith(("Module", "Optimizer")) for b in bases)


def _is_dataclass(cls: ast.ClassDef) -> bool:
    return any("dataclass" in ast.unparse(d) for d in cls.decorator_list)


def degenerate(source: str, kind: str) -> str:
    """The answer cell `source` (a reference answer) made into the degenerate answer `kind` (`KINDS`)."""
    tree = ast.parse(source)
    out: list[ast.stmt] = [*ast.parse(RUNTIME).body]
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            ref = f"_reference_{node.name}"
            original = copy.deepcopy(node)
            original.name = ref
            out += [original, _function(node.name, _body(kind, ref, "None"))]
        elif isinstance(node, ast.ClassDef) and not _is_dataclass(node):
            ref = f"_Reference_{node.name}"
            original = copy.deepcopy(node)
            original.name = ref
            keeps = _keeps_init(node)
            methods = [m for m in node.body if isinstance(m, ast.FunctionDef)
                       and not any(ast.unparse(d) in ("staticmethod", "classmethod", "property")
                                   for d in m.decorator_list)]
            body: list[ast.stmt] = []
            for m in methods:
                if m.name == "__init__":
                    if kind.startswith("raise"):
                        body.append(_function("__init__", _body(kind, "", ""), with_self=True))
                    elif not keeps:  # keep the arguments only, for a reference object when a shape is needed
                        body.append(_function("__init__", ast.parse(
                            "self._made = (args, kwargs)").body, with_self=True))
                    continue
                if keeps:
                    owner = "self"
                else:
                    owner = f"{ref}(*self._made[0], **self._made[1])"
                body.append(_function(m.name, _body(kind, f"{ref}.{m.name}", owner), with_self=True))
            cls = ast.parse(f"class {node.name}({ref}):\n    pass").body[0]
            cls.body = body or cls.body
            out += [original, cls]
        else:
            out.append(node)
    return ast.unparse(ast.fix_missing_locations(ast.Module(body=out, type_ignores=[])))


def degenerate_answers(source: str) -> dict[str, str]:
    """{kind: the degenerate answer} for one answer cell's reference `source`."""
    return {kind: degenerate(source, kind) for kind in KINDS}
