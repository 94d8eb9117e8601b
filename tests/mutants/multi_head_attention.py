from submissions import Mutant

SPLIT, MERGE, MHA, FROM = "split-heads", "merge-heads", "multi-head-attention", "multi-head-from-heads"
T_SPLIT, T_MERGE, T_MHA, T_FROM = ("test-split-heads", "test-merge-heads", "test-multi-head-attention",
                                   "test-multi-head-from-heads")

_N = "\n        "
RIGHT_SPLIT = "x.reshape(batch, seq, num_heads, d_head).transpose(1, 2)"
RIGHT_MERGE = "x.transpose(1, 2).reshape(batch, seq, num_heads * d_head)"
SPLIT_Q = "q = split_heads(self.W_q(query), self.num_heads)"
SPLIT_K = "k = split_heads(self.W_k(key), self.num_heads)"
SPLIT_V = "v = split_heads(self.W_v(value), self.num_heads)"
ATTEND = "heads, weights = scaled_dot_product_attention(q, k, v, mask)"
HEAD_AXIS = "mask = mask.unsqueeze(-3)"
STACK = "torch.cat([getattr(head, name).weight for head in heads], dim=0)"
COPY = "getattr(mha, name).weight.copy_(stacked)"
COPY_O = "mha.W_o.weight.copy_(W_o.T)"
INLINE_D_MODEL = """scores = q @ k.transpose(-2, -1) / self.d_model ** 0.5
        if mask is not None:
            scores = scores + mask
        e = (scores - scores.amax(dim=-1, keepdim=True)).exp()
        weights = e / e.sum(dim=-1, keepdim=True)
        heads = weights @ v"""
# parts of the mistakes' hints, the same in split_heads / merge_heads and in MultiHeadAttention
SPLIT_NO_TRANSPOSE = "reshape straight to (batch, num_heads, seq, d_head)"
BATCH_MIXED = "mixes heads of different sequences in the batch"
MERGE_NO_TRANSPOSE = "Did you reshape straight to (batch, seq, d_model)?"


def _view_heads_first(var: str, layer: str, src: str) -> str:
    return (f"{var} = self.{layer}({src}).view(self.num_heads, {src}.shape[0], {src}.shape[1], "
            f"self.d_head).transpose(0, 1)")


MUTANTS = [
    # split_heads
    Mutant("split: reshape without transpose", SPLIT,
           ((RIGHT_SPLIT, "x.reshape(batch, num_heads, seq, d_head)"),), (T_SPLIT,), hint=SPLIT_NO_TRANSPOSE),
    Mutant("split: indivisible d_model accepted (features dropped)", SPLIT,
           (("if d_model % num_heads != 0:", "if False:"),
            ("return x.reshape(", "return x[..., : num_heads * d_head].reshape(")), (T_SPLIT,),
           hint="expected ValueError to be raised"),
    Mutant("split: heads mixed across the batch", SPLIT,
           ((".transpose(1, 2)", ".permute(2, 0, 1, 3).reshape(batch, num_heads, seq, d_head)"),),
           (T_SPLIT,), hint=BATCH_MIXED),
    Mutant("split: features dealt out to heads in turn", SPLIT,
           ((RIGHT_SPLIT, "x.reshape(batch, seq, d_head, num_heads).permute(0, 3, 1, 2)"),), (T_SPLIT,),
           hint="deals features out to heads in turn"),
    # the contract keeps the dtype
    Mutant("split: result cast to float32", SPLIT, ((RIGHT_SPLIT, RIGHT_SPLIT + ".float()"),), (T_SPLIT,),
           hint="expected dtype float64, got float32"),
    # merge_heads
    Mutant("merge: reshape without transposing back", MERGE,
           ((RIGHT_MERGE, "x.reshape(batch, seq, num_heads * d_head)"),), (T_MERGE,), hint=MERGE_NO_TRANSPOSE),
    Mutant("merge: features ordered (d_head, num_heads)", MERGE,
           ((RIGHT_MERGE, "x.permute(0, 2, 3, 1).reshape(batch, seq, num_heads * d_head)"),), (T_MERGE,),
           hint="Did you put the features in the order (d_head, num_heads)?"),
    Mutant("merge: heads mixed across the batch", MERGE,
           ((RIGHT_MERGE, "x.reshape(num_heads, batch, seq, d_head).permute(1, 2, 0, 3)"
                          ".reshape(batch, seq, num_heads * d_head)"),), (T_MERGE,), hint=BATCH_MIXED),
    # the contract leaves x unchanged: transpose_ swaps the caller's dimensions
    Mutant("merge: transpose_ in place", MERGE, (("x.transpose(1, 2)", "x.transpose_(1, 2)"),), (T_MERGE,),
           hint="changed its input"),
    # MultiHeadAttention
    Mutant("mha: W_o missing", MHA,
           (("return self.W_o(merge_heads(heads)), weights", "return merge_heads(heads), weights"),), (T_MHA,),
           hint="Did you forget the output projection W_o?"),
    Mutant("mha: a given value ignored when key is left out", MHA,
           (("key = query if key is None else key", "key, value = (query, query) if key is None else (key, value)"),),
           (T_MHA,), hint="Did you ignore `value` because `key` was not given?"),
    Mutant("mha: d_model not divisible by num_heads accepted", MHA,
           (("if d_model % num_heads != 0:", "if False:"),), (T_MHA,), hint="expected ValueError to be raised"),
    Mutant("mha: W_q sized d_model x d_model, ignoring d_q_in", MHA,
           (("self.W_q = nn.Linear(d_q_in or d_model,", "self.W_q = nn.Linear(d_model,"),), (T_MHA,),
           hint="Did you size W_q as d_model x d_model?"),
    Mutant("mha: keys and values sized with d_q_in", MHA,
           (("self.W_k = nn.Linear(d_kv_in or d_model,", "self.W_k = nn.Linear(d_q_in or d_model,"),
            ("self.W_v = nn.Linear(d_kv_in or d_model,", "self.W_v = nn.Linear(d_q_in or d_model,")), (T_MHA,),
           hint="Did you use d_q_in for W_k or W_v?"),
    Mutant("mha: heads mixed across the batch (view(num_heads, batch, ...))", MHA,
           ((SPLIT_Q, _view_heads_first("q", "W_q", "query")),
            (SPLIT_K, _view_heads_first("k", "W_k", "key")),
            (SPLIT_V, _view_heads_first("v", "W_v", "value"))), (T_MHA,), hint=BATCH_MIXED),
    Mutant("mha: merge inline without transposing back", MHA,
           (("self.W_o(merge_heads(heads))",
             "self.W_o(heads.reshape(query.shape[0], query.shape[1], self.d_model))"),), (T_MHA,),
           hint=MERGE_NO_TRANSPOSE),
    Mutant("mha: heads never split (one wide head)", MHA,
           ((SPLIT_Q, "q = self.W_q(query).unsqueeze(1)"), (SPLIT_K, "k = self.W_k(key).unsqueeze(1)"),
            (SPLIT_V, "v = self.W_v(value).unsqueeze(1)")), (T_MHA,), hint="one head of width d_model"),
    Mutant("mha: inline attention scaled by sqrt(d_model)", MHA, ((ATTEND, INLINE_D_MODEL),), (T_MHA,),
           hint="Did you scale the scores by sqrt(d_model)?"),
    Mutant("mha: value defaults to query instead of key", MHA,
           (("value = key if value is None else value", "value = query if value is None else value"),), (T_MHA,),
           hint="Did you default the value to the query?"),
    # contract clauses: the mask is passed on; self.d_head is kept; float32 layers; no dropout (train = eval)
    Mutant("mha: mask not passed on", MHA,
           ((ATTEND, "heads, weights = scaled_dot_product_attention(q, k, v)"),), (T_MHA,),
           hint="Did you pass the mask on"),
    Mutant("mha: self.d_head not kept", MHA, (("        self.d_head = d_model // num_heads\n", ""),), (T_MHA,),
           hint="has no attribute 'd_head'"),
    Mutant("mha: W_o in float64", MHA,
           (("self.W_o = nn.Linear(d_model, d_model, bias=bias)",
             "self.W_o = nn.Linear(d_model, d_model, bias=bias, dtype=torch.float64)"),), (T_MHA,),
           hint="expected 'float32', got 'float64'"),
    Mutant("mha: dropout on the weights in training", MHA,
           ((ATTEND, ATTEND + "\n        weights = nn.functional.dropout(weights, 0.1, self.training)"
                              "\n        heads = weights @ v"),), (T_MHA,), hint="in key 'train'"),
    # the mask contract: chapter 4's shapes; the module inserts the head axis
    Mutant("mha: mask added without inserting the head axis", MHA, ((HEAD_AXIS, "mask = mask"),), (T_MHA,),
           hint="without inserting the head axis"),
    Mutant("mha: mask reshaped to (1, 1, n_q, n_k) for every shape", MHA,
           ((HEAD_AXIS, "mask = mask.reshape(1, 1, *mask.shape[-2:])"),), (T_MHA,), hint="insert the head axis"),
    # multi_head_from_heads
    Mutant("from heads: heads copied in reverse order", FROM,
           ((STACK, STACK.replace("for head in heads]", "for head in heads[::-1]]")),), (T_FROM,),
           hint="Did you copy the heads in reverse order?"),
    Mutant("from heads: head i's rows dealt out to every h-th row", FROM,
           ((COPY, "getattr(mha, name).weight.copy_(stacked.reshape(len(heads), -1, stacked.shape[1])"
                   ".transpose(0, 1).reshape(stacked.shape))"),), (T_FROM,),
           hint="every num_heads-th row"),
    Mutant("from heads: the heads' weights transposed", FROM,
           ((STACK, STACK.replace(".weight for", ".weight.T for")),), (T_FROM,),
           hint="Did you transpose the heads' weights?"),
    Mutant("from heads: W_o copied without transposing", FROM, ((COPY_O, "mha.W_o.weight.copy_(W_o)"),), (T_FROM,),
           hint="Did you copy W_o without transposing it?"),
    Mutant("from heads: W_o's blocks assigned to the rows of W_o.weight", FROM,
           ((COPY_O, "for i in range(len(heads)):\n"
                     "            rows = slice(i * mha.d_head, (i + 1) * mha.d_head)\n"
                     "            mha.W_o.weight[rows].copy_(W_o[rows])"),), (T_FROM,),
           hint="Did you copy W_o without transposing it?"),
    Mutant("from heads: W_v filled from the heads' W_k", FROM,
           ((STACK, "torch.cat([getattr(head, 'W_k' if name == 'W_v' else name).weight for head in heads], dim=0)"),),
           (T_FROM,), hint="Did you fill W_v with the heads' W_k weights?"),
    # contract clauses: W_o unchanged, mha returned, float32 parameters, no_grad
    Mutant("from heads: W_o transposed in place", FROM, ((COPY_O, "mha.W_o.weight.copy_(W_o.t_())"),), (T_FROM,),
           hint="changed its input"),
    Mutant("from heads: mha not returned", FROM, (("\n    return mha", "\n    return None"),), (T_FROM,),
           hint="key 'returns mha'"),
    Mutant("from heads: W_o replaced by a float64 parameter", FROM,
           ((COPY_O, "mha.W_o.weight = nn.Parameter(W_o.T.double())"),), (T_FROM,), hint="float64"),
    Mutant("from heads: copied without torch.no_grad()", FROM,
           (("    with torch.no_grad():\n", "    if True:\n"),), (T_FROM,), hint="torch.no_grad()"),
    # PyTorch's own layer with the student's weights copied in (`course.twins`): not the exercise
    Mutant("nn.MultiheadAttention with the weights copied in", MHA,
           ((SPLIT_Q, "from course.twins import load_twin, torch_attn_mask" + _N
             + "twin = load_twin(nn.MultiheadAttention(self.d_model, self.num_heads, batch_first=True, "
               "dtype=query.dtype), dict(self.named_parameters()))" + _N
             + "m = torch_attn_mask(mask, query.shape[0], self.num_heads, query.shape[1], key.shape[1])" + _N
             + "return twin(query, key, value, attn_mask=None if m is None else m.to(query.dtype), "
               "average_attn_weights=False)" + _N + SPLIT_Q),), (T_MHA,), hint="is not allowed in this exercise"),
]
