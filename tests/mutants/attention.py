from submissions import Mutant

_SCORES = "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)"
_MASK = "scores = scores + mask"
_SOFTMAX = "weights = softmax(scores, dim=-1)"
_RETURN_HEAD = "return scaled_dot_product_attention(q, k, v, mask)"

MUTANTS = [
    # --- 4.1 softmax
    Mutant("softmax without max-subtraction (overflow)", "softmax",
           (("shifted = x - x.amax(dim=dim, keepdim=True)", "shifted = x"),), ("test-softmax",)),
    Mutant("softmax always over the last axis", "softmax",
           (("x.amax(dim=dim, keepdim=True)", "x.amax(dim=-1, keepdim=True)"),
            ("e.sum(dim=dim, keepdim=True)", "e.sum(dim=-1, keepdim=True)")), ("test-softmax",)),
    Mutant("softmax over the first axis", "softmax",
           (("x.amax(dim=dim, keepdim=True)", "x.amax(dim=0, keepdim=True)"),
            ("e.sum(dim=dim, keepdim=True)", "e.sum(dim=0, keepdim=True)")), ("test-softmax",)),
    Mutant("softmax max without keepdim", "softmax",
           (("x.amax(dim=dim, keepdim=True)", "x.amax(dim=dim)"),), ("test-softmax",)),
    Mutant("softmax normalised over the whole tensor", "softmax",
           (("e.sum(dim=dim, keepdim=True)", "e.sum()"),), ("test-softmax",)),
    Mutant("softmax via torch.softmax (not allowed)", "softmax",
           (("return e / e.sum(dim=dim, keepdim=True)", "return torch.softmax(x, dim=dim)"),), ("test-softmax",)),
    # --- 4.2 scaled dot-product attention
    Mutant("scaled by d_k, not sqrt(d_k)", "sdpa", ((_SCORES, "scores = q @ k.transpose(-2, -1) / d_k"),),
           ("test-sdpa",)),
    Mutant("not scaled", "sdpa", ((_SCORES, "scores = q @ k.transpose(-2, -1)"),), ("test-sdpa",)),
    Mutant("scaled by sqrt(sequence length)", "sdpa",
           ((_SCORES, "scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-2])"),), ("test-sdpa",)),
    Mutant("scaled by sqrt(d_v)", "sdpa",
           ((_SCORES, "scores = q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])"),), ("test-sdpa",)),
    Mutant("softmax over the query axis", "sdpa", ((_SOFTMAX, "weights = softmax(scores, dim=-2)"),),
           ("test-sdpa",)),
    Mutant("K not transposed", "sdpa", ((_SCORES, "scores = q @ k / math.sqrt(d_k)"),), ("test-sdpa",)),
    Mutant("k.T breaks batch dimensions", "sdpa", ((_SCORES, "scores = q @ k.T / math.sqrt(d_k)"),),
           ("test-sdpa",)),
    Mutant("torch.mm breaks batch dimensions", "sdpa",
           ((_SCORES, "scores = torch.mm(q, k.transpose(-2, -1)) / math.sqrt(d_k)"),), ("test-sdpa",)),
    Mutant("inline softmax without max-subtraction", "sdpa",
           ((_SOFTMAX, "weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)"),), ("test-sdpa",)),
    Mutant("mask multiplied in after the softmax", "sdpa",
           ((_MASK, "pass"),
            (_SOFTMAX, _SOFTMAX + "\n    if mask is not None:\n        weights = weights * (mask == 0)")),
           ("test-sdpa",)),
    Mutant("mask added after the softmax", "sdpa",
           ((_MASK, "pass"), (_SOFTMAX, _SOFTMAX + "\n    if mask is not None:\n        weights = weights + mask")),
           ("test-sdpa",)),
    Mutant("mask subtracted (wrong sign)", "sdpa", ((_MASK, "scores = scores - mask"),), ("test-sdpa",)),
    Mutant("mask inverted", "sdpa",
           ((_MASK, 'scores = scores + torch.where(mask == 0, float("-inf"), 0.0)'),), ("test-sdpa",)),
    Mutant("mask transposed (wrong triangle)", "sdpa", ((_MASK, "scores = scores + mask.transpose(-2, -1)"),),
           ("test-sdpa",)),
    Mutant("mask ignored", "sdpa", ((_MASK, "pass"),), ("test-sdpa",)),
    Mutant("fully masked rows give NaN silently", "sdpa",
           (("if torch.isneginf(scores).all(dim=-1).any():", "if False:"),), ("test-sdpa",)),
    # --- 4.3 attention head
    Mutant("head ignores the context", "attention-head",
           (("source = x if context is None else context", "source = x"),), ("test-attention-head",)),
    Mutant("head takes queries from the context", "attention-head",
           (("self.W_q(x)", "self.W_q(source)"),), ("test-attention-head",)),
    Mutant("head projections with bias", "attention-head",
           (("self.W_q = nn.Linear(d_in, d_k, bias=False)", "self.W_q = nn.Linear(d_in, d_k)"),),
           ("test-attention-head",)),
    Mutant("head W_v sized by d_k", "attention-head", (("d_v or d_k", "d_k"),), ("test-attention-head",)),
    Mutant("head scales by sqrt(d_in)", "attention-head",
           ((_RETURN_HEAD, "scores = q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])\n"
                           "        if mask is not None:\n"
                           "            scores = scores + mask\n"
                           "        weights = torch.softmax(scores, dim=-1)\n"
                           "        return weights @ v, weights"),), ("test-attention-head",)),
    Mutant("head swaps W_q and W_k", "attention-head",
           (("self.W_q(x), self.W_k(source)", "self.W_k(x), self.W_q(source)"),), ("test-attention-head",)),
]
