from submissions import Mutant

_SHIFT = "shifted = x - x.amax(dim=dim, keepdim=True)"
_SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)"
_MASK = "scores = scores + mask"
_SOFTMAX = "weights = softmax(scores, dim=-1)"
_RETURN_SDPA = "return weights @ v, weights"
_RETURN_HEAD = "return scaled_dot_product_attention(q, k, v, mask)"
_W_V = "self.W_v = nn.Linear(d_in, d_v or d_k, bias=False)"
_T_SOFTMAX, _T_SDPA, _T_HEAD = ("test-softmax",), ("test-sdpa",), ("test-attention-head",)
_SDPA_HINT = "k.T and torch.mm do not"  # part of the sdpa checks' general hint

MUTANTS = [
    # --- 4.1 softmax
    Mutant("softmax without max-subtraction (overflow)", "softmax", ((_SHIFT, "shifted = x"),), _T_SOFTMAX,
           hint="Did you skip subtracting the maximum?"),
    Mutant("softmax always over the last axis", "softmax",
           (("x.amax(dim=dim, keepdim=True)", "x.amax(dim=-1, keepdim=True)"),
            ("e.sum(dim=dim, keepdim=True)", "e.sum(dim=-1, keepdim=True)")), _T_SOFTMAX,
           hint="Did you always use the last axis?"),
    Mutant("softmax over the first axis", "softmax",
           (("x.amax(dim=dim, keepdim=True)", "x.amax(dim=0, keepdim=True)"),
            ("e.sum(dim=dim, keepdim=True)", "e.sum(dim=0, keepdim=True)")), _T_SOFTMAX,
           hint="Did you normalise along the wrong axis?"),
    Mutant("softmax max without keepdim", "softmax", (("x.amax(dim=dim, keepdim=True)", "x.amax(dim=dim)"),),
           _T_SOFTMAX, hint="keepdim=True"),
    Mutant("softmax normalised over the whole tensor", "softmax", (("e.sum(dim=dim, keepdim=True)", "e.sum()"),),
           _T_SOFTMAX, hint="Did you divide by the sum over the whole tensor"),
    Mutant("softmax via torch.softmax (not allowed)", "softmax",
           (("return e / e.sum(dim=dim, keepdim=True)", "return torch.softmax(x, dim=dim)"),), _T_SOFTMAX,
           hint="is not allowed in this exercise"),
    Mutant("softmax via Tensor.softmax (not allowed)", "softmax",
           (("return e / e.sum(dim=dim, keepdim=True)", "return x.softmax(dim)"),), _T_SOFTMAX,
           hint="torch.Tensor.softmax is not allowed in this exercise"),
    # the contract leaves x unchanged and keeps its dtype
    Mutant("softmax shifts x in place", "softmax", ((_SHIFT, "shifted = x.sub_(x.amax(dim=dim, keepdim=True))"),),
           _T_SOFTMAX, hint="changed its input"),
    Mutant("softmax always returns float32", "softmax",
           (("return e / e.sum(dim=dim, keepdim=True)", "return (e / e.sum(dim=dim, keepdim=True)).float()"),),
           _T_SOFTMAX, hint="expected dtype float64, got float32"),
    # --- 4.2 scaled dot-product attention
    Mutant("scaled by d_k, not sqrt(d_k)", "sdpa", ((_SCORES, "scores = q @ k.transpose(-2, -1) / d_k"),), _T_SDPA,
           hint="Did you divide by d_k instead of sqrt(d_k)?"),
    Mutant("not scaled", "sdpa", ((_SCORES, "scores = q @ k.transpose(-2, -1)"),), _T_SDPA,
           hint="Did you forget to divide the scores by sqrt(d_k)?"),
    Mutant("scaled by sqrt(sequence length)", "sdpa",
           ((_SCORES, "scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2])"),), _T_SDPA,
           hint="Did you divide by the square root of the sequence length?"),
    Mutant("scaled by sqrt(d_v)", "sdpa", ((_SCORES, "scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])"),),
           _T_SDPA, hint="Did you divide by sqrt(d_v)?"),
    Mutant("softmax over the query axis", "sdpa", ((_SOFTMAX, "weights = softmax(scores, dim=-2)"),), _T_SDPA,
           hint="Did you take the softmax over the queries (dim=-2)?"),
    Mutant("K not transposed", "sdpa", ((_SCORES, "scores = q @ k / math.sqrt(d_k)"),), _T_SDPA,
           hint="transpose(-2, -1)"),
    Mutant("k.T breaks batch dimensions", "sdpa", ((_SCORES, "scores = q @ k.T / math.sqrt(d_k)"),), _T_SDPA,
           hint=_SDPA_HINT),
    Mutant("torch.mm breaks batch dimensions", "sdpa",
           ((_SCORES, "scores = torch.mm(q, k.transpose(-2, -1)) / math.sqrt(d_k)"),), _T_SDPA, hint=_SDPA_HINT),
    Mutant("inline softmax without max-subtraction", "sdpa",
           ((_SOFTMAX, "weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)"),), _T_SDPA,
           hint="NaN on large scores means a softmax without max-subtraction"),
    Mutant("mask multiplied in after the softmax", "sdpa",
           ((_MASK, "pass"),
            (_SOFTMAX, _SOFTMAX + "\n    if mask is not None:\n        weights = weights * (mask == 0)")),
           _T_SDPA, hint="Did you apply the mask after the softmax?"),
    Mutant("mask added after the softmax", "sdpa",
           ((_MASK, "pass"), (_SOFTMAX, _SOFTMAX + "\n    if mask is not None:\n        weights = weights + mask")),
           _T_SDPA, hint="Did you add the mask to the weights after the softmax?"),
    Mutant("mask subtracted (wrong sign)", "sdpa", ((_MASK, "scores = scores - mask"),), _T_SDPA,
           hint="Did you subtract the mask?"),
    Mutant("mask inverted", "sdpa", ((_MASK, 'scores = scores + torch.where(mask == 0, float("-inf"), 0.0)'),),
           _T_SDPA, hint="Did you invert the mask"),
    Mutant("mask transposed (wrong triangle)", "sdpa", ((_MASK, "scores = scores + mask.transpose(-2, -1)"),),
           _T_SDPA, hint="Did you transpose the mask?"),
    Mutant("mask ignored", "sdpa", ((_MASK, "pass"),), _T_SDPA, hint="Did you ignore the mask?"),
    Mutant("fully masked rows give NaN silently", "sdpa",
           (("if torch.isneginf(scores).all(dim=-1).any():", "if False:"),), _T_SDPA,
           hint="expected ValueError to be raised"),
    # contract clauses: raise only for fully masked rows; the fused function is not allowed;
    # q, k, v and mask stay unchanged; float32 in, float32 out
    Mutant("raises for any masked key, not only fully masked rows", "sdpa",
           (("if torch.isneginf(scores).all(dim=-1).any():", "if torch.isneginf(scores).any():"),), _T_SDPA,
           hint="raise for rows with *some* masked keys?"),
    Mutant("calls the fused scaled_dot_product_attention (not allowed)", "sdpa",
           ((_RETURN_SDPA, "return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask), "
                           "weights"),), _T_SDPA, hint="is not allowed in this exercise"),
    Mutant("scales q in place", "sdpa",
           ((_SCORES, "q /= math.sqrt(d_k)\n    scores = q @ k.transpose(-2, -1)"),), _T_SDPA,
           hint="changed its input (argument 1)"),
    Mutant("computes in float64 and returns it", "sdpa",
           ((_SOFTMAX, "weights = softmax(scores.double(), dim=-1)"),
            (_RETURN_SDPA, "return weights @ v.double(), weights")),
           _T_SDPA, hint="expected dtype float32, got float64"),
    # --- 4.3 attention head
    Mutant("head ignores the context", "attention-head",
           (("source = x if context is None else context", "source = x"),), _T_HEAD,
           hint="Did you ignore `context`?"),
    Mutant("head takes queries from the context", "attention-head", (("self.W_q(x)", "self.W_q(source)"),), _T_HEAD,
           hint="Did you take the queries from the context?"),
    Mutant("head projections with bias", "attention-head",
           (("self.W_q = nn.Linear(d_in, d_k, bias=False)", "self.W_q = nn.Linear(d_in, d_k)"),), _T_HEAD,
           hint="which the contract leaves out"),
    Mutant("head W_v sized by d_k", "attention-head", (("d_v or d_k", "d_k"),), _T_HEAD, hint="size W_v by d_k"),
    Mutant("head scales by sqrt(d_in)", "attention-head",
           ((_RETURN_HEAD, "scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])\n"
                           "        if mask is not None:\n"
                           "            scores = scores + mask\n"
                           "        e = (scores - scores.amax(dim=-1, keepdim=True)).exp()\n"
                           "        weights = e / e.sum(dim=-1, keepdim=True)\n"
                           "        return weights @ v, weights"),), _T_HEAD, hint="Did you scale by sqrt(d_in)?"),
    Mutant("head swaps W_q and W_k", "attention-head",
           (("self.W_q(x), self.W_k(source)", "self.W_k(x), self.W_q(source)"),), _T_HEAD,
           hint="Did you swap W_q and W_k?"),
    # contract clauses: the mask is passed on; float32 parameters; no dropout (train = eval)
    Mutant("head drops the mask", "attention-head",
           ((_RETURN_HEAD, "return scaled_dot_product_attention(q, k, v)"),), _T_HEAD,
           hint="Did you pass the mask on"),
    Mutant("head in float64", "attention-head", ((_W_V, _W_V + "\n        self.double()"),), _T_HEAD,
           hint="expected 'float32', got 'float64'"),
    Mutant("head with dropout on the weights in training", "attention-head",
           ((_RETURN_HEAD, "output, weights = scaled_dot_product_attention(q, k, v, mask)\n"
                           "        weights = nn.functional.dropout(weights, 0.1, self.training)\n"
                           "        return weights @ v, weights"),), _T_HEAD, hint="in key 'train'"),
]
