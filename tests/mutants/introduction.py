from submissions import Mutant

_RET = "return x @ W + b"
_CELL, _TEST = "linear-rows", ("test-linear-rows",)
_HINT = "y = x @ W + b, with W of shape (d_in, d_out)"  # the check's general hint

MUTANTS = [
    Mutant("bias forgotten", _CELL, ((_RET, "return x @ W"),), _TEST, hint="Did you forget to add the bias b?"),
    Mutant("weight transposed", _CELL, ((_RET, "return x @ W.T + b"),), _TEST,
           hint="Did you multiply by W transposed?"),
    Mutant("2-D only (torch.mm)", _CELL, ((_RET, "return torch.mm(x, W) + b"),), _TEST, hint=_HINT),
    Mutant("batch flattened, not restored", _CELL, ((_RET, "return x.reshape(-1, W.shape[0]) @ W + b"),),
           _TEST, hint="expected shape"),
    Mutant("bias subtracted", _CELL, ((_RET, "return x @ W - b"),), _TEST,
           hint="Did you subtract the bias instead of adding it?"),
    # the classes of mistake every chapter must catch: dtype, forbidden calls
    Mutant("result cast to float32", _CELL, ((_RET, "return (x @ W + b).float()"),), _TEST,
           hint="expected dtype float64, got float32"),
    Mutant("torch.nn.functional.linear (not allowed)", _CELL,
           ((_RET, "return torch.nn.functional.linear(x, W.T, b)"),), _TEST, hint="is not allowed in this exercise"),
]
