from submissions import Mutant

MUTANTS = [
    Mutant("bias forgotten", "linear-rows", (("return x @ W + b", "return x @ W"),), ("test-linear-rows",)),
    Mutant("weight transposed", "linear-rows", (("return x @ W + b", "return x @ W.T + b"),),
           ("test-linear-rows",)),
    Mutant("2-D only (torch.mm)", "linear-rows", (("return x @ W + b", "return torch.mm(x, W) + b"),),
           ("test-linear-rows",)),
    Mutant("batch flattened, not restored", "linear-rows",
           (("return x @ W + b", "return x.reshape(-1, W.shape[0]) @ W + b"),), ("test-linear-rows",)),
]
