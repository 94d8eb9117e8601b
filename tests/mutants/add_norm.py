from submissions import Mutant

_MEAN = "mean = x.mean(dim=-1, keepdim=True)"
_CENTRED = "centred = x - mean"
_VAR = "var = (centred ** 2).mean(dim=-1, keepdim=True)"
_X_HAT = "x_hat = centred / torch.sqrt(var + eps)"
_RET = "return gamma * x_hat + beta"
_GAMMA = "self.gamma = nn.Parameter(torch.ones(d_model))"
_BETA = "self.beta = nn.Parameter(torch.zeros(d_model))"
_FORWARD = "return layer_norm(x, self.gamma, self.beta, self.eps)"
_POST = "return norm(x + sublayer(x))"
_PRE = "return x + sublayer(norm(x))"

LN, MODULE, RESIDUAL = "layer-norm", "layer-norm-module", "residual"
T61, T62, T63 = ("test-layer-norm",), ("test-layer-norm-module",), ("test-residual",)

MUTANTS = [
    # --- 6.1 layer_norm: the objectives' mistakes
    Mutant("eps outside the square root", LN, ((_X_HAT, "x_hat = centred / (torch.sqrt(var) + eps)"),), T61,
           hint="Did you put eps outside the square root?"),
    Mutant("no eps at all", LN, ((_X_HAT, "x_hat = centred / torch.sqrt(var)"),), T61, hint="Did you forget eps?"),
    Mutant("unbiased variance (torch.var's default)", LN, ((_VAR, "var = x.var(dim=-1, keepdim=True)"),), T61,
           hint="Did you use the unbiased variance"),
    Mutant("unbiased variance written out (divide by d - 1)", LN,
           ((_VAR, "var = (centred ** 2).sum(dim=-1, keepdim=True) / (x.shape[-1] - 1)"),), T61,
           hint="Did you use the unbiased variance"),
    Mutant("normalised over the first axis", LN,
           ((_MEAN, "mean = x.mean(dim=0, keepdim=True)"), (_VAR, "var = (centred ** 2).mean(dim=0, keepdim=True)")),
           T61, hint="Did you normalise over the first axis (dim=0)?"),
    Mutant("normalised over the whole tensor", LN, ((_MEAN, "mean = x.mean()"), (_VAR, "var = (centred ** 2).mean()")),
           T61, hint="Did you normalise over the whole tensor?"),
    Mutant("normalised over the last two axes", LN,
           ((_MEAN, "mean = x.mean(dim=(-2, -1), keepdim=True)"),
            (_VAR, "var = (centred ** 2).mean(dim=(-2, -1), keepdim=True)")), T61,
           hint="Did you normalise over the last two axes"),
    Mutant("square root of the standard deviation", LN,
           ((_X_HAT, "x_hat = centred / torch.sqrt(torch.sqrt(var) + eps)"),), T61,
           hint="Did you divide by the standard deviation's square root?"),
    Mutant("square root forgotten (divides by the variance)", LN, ((_X_HAT, "x_hat = centred / (var + eps)"),), T61,
           hint="Did you forget the square root?"),
    Mutant("mean not subtracted", LN, ((_X_HAT, "x_hat = x / torch.sqrt(var + eps)"),), T61,
           hint="Did you forget to subtract the mean?"),
    Mutant("gamma and beta swapped", LN, ((_RET, "return beta * x_hat + gamma"),), T61,
           hint="Did you swap gamma and beta?"),
    Mutant("beta forgotten", LN, ((_RET, "return gamma * x_hat"),), T61, hint="Did you forget to add beta?"),
    Mutant("one-pass variance, mean(x**2) - mean**2", LN, ((_VAR, "var = (x * x).mean(dim=-1, keepdim=True) - mean ** 2"),),
           T61, hint="Did you compute the variance as mean(x**2) - mean(x)**2?"),
    Mutant("eps argument ignored", LN, ((_X_HAT, "x_hat = centred / torch.sqrt(var + 1e-5)"),), T61,
           hint="Did you ignore the eps argument?"),
    # the general classes: an input changed in place, the dtype, a forbidden call
    Mutant("x centred in place", LN, ((_CENTRED, "centred = x.sub_(mean)"),), T61, hint="changed its input"),
    Mutant("result cast to float32", LN, ((_RET, "return (gamma * x_hat + beta).float()"),), T61,
           hint="expected dtype float64, got float32"),
    Mutant("calls F.layer_norm (not allowed)", LN,
           ((_RET, "return torch.nn.functional.layer_norm(x, x.shape[-1:], gamma, beta, eps)"),), T61,
           hint="is not allowed in this exercise"),
    # --- 6.2 LayerNorm
    Mutant("gamma initialised to zeros, beta to ones", MODULE,
           ((_GAMMA, "self.gamma = nn.Parameter(torch.zeros(d_model))"),
            (_BETA, "self.beta = nn.Parameter(torch.ones(d_model))")), T62,
           hint="Did you initialise gamma to zeros and beta to ones?"),
    Mutant("gamma and beta of shape (1,)", MODULE,
           ((_GAMMA, "self.gamma = nn.Parameter(torch.ones(1))"), (_BETA, "self.beta = nn.Parameter(torch.zeros(1))")),
           T62, hint="not (1,)"),
    Mutant("gamma and beta of shape (1, 1, d_model)", MODULE,
           ((_GAMMA, "self.gamma = nn.Parameter(torch.ones(1, 1, d_model))"),
            (_BETA, "self.beta = nn.Parameter(torch.zeros(1, 1, d_model))")), T62, hint="not (1, 1, d_model)"),
    Mutant("gamma and beta as plain tensors (not learned)", MODULE,
           ((_GAMMA, "self.gamma = torch.ones(d_model)"), (_BETA, "self.beta = torch.zeros(d_model)")), T62,
           hint="Did you store gamma and beta as plain tensors (or buffers)?"),
    Mutant("gamma and beta in float64", MODULE,
           ((_GAMMA, "self.gamma = nn.Parameter(torch.ones(d_model, dtype=torch.float64))"),
            (_BETA, "self.beta = nn.Parameter(torch.zeros(d_model, dtype=torch.float64))")), T62,
           hint="not float64"),
    Mutant("d_model < 1 accepted", MODULE, (("if d_model < 1:", "if False:"),), T62,
           hint="expected ValueError to be raised (d_model must be at least 1"),
    Mutant("eps not passed on", MODULE, ((_FORWARD, "return layer_norm(x, self.gamma, self.beta)"),), T62,
           hint="Did you pass eps on?"),
    Mutant("dropout in training mode", MODULE,
           ((_FORWARD, ("return nn.functional.dropout(layer_norm(x, self.gamma, self.beta, self.eps), 0.1, "
                        "self.training)")),), T62, hint="key 'train'"),
    Mutant("forward centres x in place", MODULE,
           ((_FORWARD, "x = x.sub_(x.mean(dim=-1, keepdim=True))\n        " + _FORWARD),), T62, hint="changed its input"),
    Mutant("calls F.layer_norm in forward (not allowed)", MODULE,
           ((_FORWARD, "return torch.nn.functional.layer_norm(x, x.shape[-1:], self.gamma, self.beta, self.eps)"),),
           T62, hint="is not allowed in this exercise"),
    # --- 6.3 the residual wirings
    Mutant("post-LN wired as pre-LN", RESIDUAL, ((_POST, "return x + sublayer(norm(x))"),), T63,
           hint="Did you wire it pre-LN?"),
    Mutant("post-LN without the residual", RESIDUAL, ((_POST, "return norm(sublayer(x))"),), T63,
           hint="Did you forget the residual?"),
    Mutant("post-LN normalises the branch only", RESIDUAL, ((_POST, "return x + norm(sublayer(x))"),), T63,
           hint="Did you normalise only the sub-layer's output?"),
    Mutant("pre-LN adds the normalised input", RESIDUAL,
           ((_PRE, "h = norm(x)\n    return h + sublayer(h)"),), T63,
           hint="Did you add the normalised input instead of the raw one?"),
    Mutant("pre-LN wired as post-LN", RESIDUAL, ((_PRE, "return norm(x + sublayer(x))"),), T63,
           hint="Did you wire it post-LN?"),
    Mutant("pre-LN without the residual", RESIDUAL, ((_PRE, "return sublayer(norm(x))"),), T63,
           hint="Did you forget the residual?"),
    Mutant("pre-LN normalises the sum too", RESIDUAL, ((_PRE, "return norm(x + sublayer(norm(x)))"),), T63,
           hint="Did you normalise the sum as well?"),
    Mutant("pre-LN adds in place", RESIDUAL, ((_PRE, "x += sublayer(norm(x))\n    return x"),), T63,
           hint="changed its input"),
    Mutant("post-LN result cast to float32", RESIDUAL, ((_POST, "return norm(x + sublayer(x)).float()"),), T63,
           hint="expected dtype float64, got float32"),
]
