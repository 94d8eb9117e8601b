"""11.3 GroupedQueryAttention: realistic wrong answers (the syllabus's mistakes, then general ones)."""

from submissions import Mutant

GQA, T = "gqa", ("test-gqa",)
_POS = "positions = torch.arange(t, t + n, device=x.device)"
_K = "k = apply_rope(split_heads(self.W_k(x), self.num_kv_heads), positions, self.rope_base)"
_V = "v = split_heads(self.W_v(x), self.num_kv_heads)"
_CAT = "k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)"
_REP = "k_all, v_all = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)"
_ATT = "heads, _ = scaled_dot_product_attention(q, k_all, v_all, mask)"
_RET = "return self.W_o(merge_heads(heads)), (k, v)"
_N = "\n            "

MUTANTS = [
    Mutant("values rotated too", GQA, ((_V, f"v = apply_rope({_V[4:]}, positions, self.rope_base)"),), T,
           hint="Did you rotate the values too?"),
    Mutant("positions restart at 0 inside the cache", GQA, ((_POS, "positions = torch.arange(n, device=x.device)"),),
           T, hint="Did you restart the positions at 0?"),
    Mutant("key/value heads repeated with repeat (tiled)", GQA,
           ((_REP, "k_all, v_all = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)"),), T,
           hint="Did you repeat the key/value heads in the wrong order?"),
    Mutant("no causal mask", GQA, ((_ATT, "heads, _ = scaled_dot_product_attention(q, k_all, v_all)"),), T,
           hint="Did you leave out the causal mask?"),
    Mutant("a square causal mask with a cache (aligned top-left)", GQA,
           (("future = torch.ones(n, t + n, dtype=torch.bool, device=x.device).triu(diagonal=t + 1)",
             "future = torch.ones(n, t + n, dtype=torch.bool, device=x.device).triu(diagonal=1)"),), T,
           hint="Did you use is_causal=True (or a square causal mask) with a cache?"),
    Mutant("un-rotated keys cached", GQA,
           ((_K, "k_raw = split_heads(self.W_k(x), self.num_kv_heads)\n        "
                 "k = apply_rope(k_raw, positions, self.rope_base)"),
            (_CAT, _CAT + _N + "k_raw = torch.cat([cache[0], k_raw], dim=2)"),
            (_RET, "return self.W_o(merge_heads(heads)), (k_raw, v)")), T,
           hint="Did you cache the keys before rotating them?"),
    Mutant("cached keys rotated again", GQA,
           ((_K, "k = split_heads(self.W_k(x), self.num_kv_heads)"),  # rotated after the cache is joined, all of it
            (_CAT, _CAT + "\n        k = apply_rope(k, torch.arange(t + n, device=x.device), self.rope_base)")), T,
           hint="Did you rotate the cached keys again?"),
    Mutant("cache returned unchanged", GQA, ((_RET, "return self.W_o(merge_heads(heads)), cache"),), T,
           hint="Did you return the cache you were given?"),
    Mutant("biases", GQA, tuple((f"self.W_{c} = nn.Linear({i}, {o}, bias=False)", f"self.W_{c} = nn.Linear({i}, {o})")
                                for c, i, o in (("q", "d_model", "num_heads * self.d_head"),
                                                ("k", "d_model", "num_kv_heads * self.d_head"),
                                                ("v", "d_model", "num_kv_heads * self.d_head"),
                                                ("o", "num_heads * self.d_head", "d_model"))), T,
           hint="Did you give the projections biases?"),
    Mutant("full-width keys and values (num_heads key/value heads)", GQA,
           (("self.W_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)",
             "self.W_k = nn.Linear(d_model, d_model, bias=False)"),
            ("self.W_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)",
             "self.W_v = nn.Linear(d_model, d_model, bias=False)")), T,
           hint="Did you give W_k and W_v num_heads heads?"),
    Mutant("num_kv_heads not checked", GQA, (("if num_kv_heads < 1 or d_model % num_heads or num_heads % num_kv_heads:",
                                              "if d_model % num_heads:"),), T,
           hint="expected ValueError to be raised (num_kv_heads"),
    Mutant("an odd d_head not refused", GQA, (("if d_model // num_heads % 2:", "if False:"),), T,
           hint="expected ValueError to be raised (d_head"),
    # general classes
    Mutant("PyTorch's fused attention (forbidden)", GQA,
           ((_REP, "k_all, v_all = k, v"),
            (_ATT, "heads = torch.nn.functional.scaled_dot_product_attention(q, k_all, v_all, attn_mask=~future, "
                   "enable_gqa=True)")), T,
           hint="is not allowed in this exercise"),
    Mutant("dropout on the attention output in training mode", GQA,
           ((_ATT, _ATT + "\n        heads = torch.nn.functional.dropout(heads, 0.1, self.training)"),), T,
           hint="key 'train'"),
    Mutant("the cache passed in emptied in place", GQA,
           ((_CAT, _CAT + _N + "cache[0].zero_(), cache[1].zero_()  # no longer needed"),), T,
           hint="the cache passed in, after the call"),
    Mutant("GQA: the repeated heads cached", GQA, ((_RET, "return self.W_o(merge_heads(heads)), (k_all, v_all)"),), T,
           hint="Did you cache the key/value heads after repeating them?"),
    Mutant("GQA: scores divided by sqrt(d_model)", GQA,
           ((_ATT, "heads = torch.softmax(q @ k_all.transpose(-2, -1) / x.shape[-1] ** 0.5 + mask, dim=-1) @ v_all"),),
           T, hint="Did you divide the scores by sqrt(d_model)?"),
]
