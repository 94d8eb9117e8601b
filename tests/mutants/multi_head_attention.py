from submissions import Mutant

SPLIT, MERGE, MHA = "split-heads", "merge-heads", "multi-head-attention"
T_SPLIT, T_MERGE, T_MHA = "test-split-heads", "test-merge-heads", "test-multi-head-attention"

RIGHT_SPLIT = "x.reshape(batch, seq, num_heads, d_head).transpose(1, 2)"
RIGHT_MERGE = "x.transpose(1, 2).reshape(batch, seq, num_heads * d_head)"
SPLIT_Q = "q = split_heads(self.W_q(query), self.num_heads)"
SPLIT_K = "k = split_heads(self.W_k(key), self.num_heads)"
SPLIT_V = "v = split_heads(self.W_v(value), self.num_heads)"
ATTEND = "heads, weights = scaled_dot_product_attention(q, k, v, mask)"
INLINE_D_MODEL = """scores = q @ k.transpose(-2, -1) / self.d_model ** 0.5
        if mask is not None:
            scores = scores + mask
        weights = scores.softmax(dim=-1)
        heads = weights @ v"""


def _view_heads_first(var: str, layer: str, src: str) -> str:
    return (f"{var} = self.{layer}({src}).view(self.num_heads, {src}.shape[0], {src}.shape[1], "
            f"self.d_head).transpose(0, 1)")


MUTANTS = [
    # split_heads
    Mutant("split: reshape without transpose", SPLIT,
           ((RIGHT_SPLIT, "x.reshape(batch, num_heads, seq, d_head)"),), (T_SPLIT, T_MHA)),
    Mutant("split: indivisible d_model accepted (features dropped)", SPLIT,
           (("if d_model % num_heads != 0:", "if False:"),
            ("return x.reshape(", "return x[..., : num_heads * d_head].reshape(")), (T_SPLIT,)),
    Mutant("split: heads mixed across the batch", SPLIT,
           ((".transpose(1, 2)", ".permute(2, 0, 1, 3).reshape(batch, num_heads, seq, d_head)"),),
           (T_SPLIT, T_MHA)),
    Mutant("split: features dealt out to heads in turn", SPLIT,
           ((RIGHT_SPLIT, "x.reshape(batch, seq, d_head, num_heads).permute(0, 3, 1, 2)"),), (T_SPLIT, T_MHA)),
    # merge_heads
    Mutant("merge: reshape without transposing back", MERGE,
           ((RIGHT_MERGE, "x.reshape(batch, seq, num_heads * d_head)"),), (T_MERGE, T_MHA)),
    Mutant("merge: features ordered (d_head, num_heads)", MERGE,
           ((RIGHT_MERGE, "x.permute(0, 2, 3, 1).reshape(batch, seq, num_heads * d_head)"),), (T_MERGE, T_MHA)),
    Mutant("merge: heads mixed across the batch", MERGE,
           ((RIGHT_MERGE, "x.reshape(num_heads, batch, seq, d_head).permute(1, 2, 0, 3)"
                          ".reshape(batch, seq, num_heads * d_head)"),), (T_MERGE, T_MHA)),
    # MultiHeadAttention
    Mutant("mha: W_o missing", MHA,
           (("return self.W_o(merge_heads(heads)), weights", "return merge_heads(heads), weights"),), (T_MHA,)),
    Mutant("mha: d_model not divisible by num_heads accepted", MHA,
           (("if d_model % num_heads != 0:", "if False:"),), (T_MHA,)),
    Mutant("mha: W_q sized d_model x d_model, ignoring d_q_in", MHA,
           (("self.W_q = nn.Linear(d_q_in or d_model,", "self.W_q = nn.Linear(d_model,"),), (T_MHA,)),
    Mutant("mha: keys and values sized with d_q_in", MHA,
           (("self.W_k = nn.Linear(d_kv_in or d_model,", "self.W_k = nn.Linear(d_q_in or d_model,"),
            ("self.W_v = nn.Linear(d_kv_in or d_model,", "self.W_v = nn.Linear(d_q_in or d_model,")), (T_MHA,)),
    Mutant("mha: heads mixed across the batch (view(num_heads, batch, ...))", MHA,
           ((SPLIT_Q, _view_heads_first("q", "W_q", "query")),
            (SPLIT_K, _view_heads_first("k", "W_k", "key")),
            (SPLIT_V, _view_heads_first("v", "W_v", "value"))), (T_MHA,)),
    Mutant("mha: merge inline without transposing back", MHA,
           (("self.W_o(merge_heads(heads))",
             "self.W_o(heads.reshape(query.shape[0], query.shape[1], self.d_model))"),), (T_MHA,)),
    Mutant("mha: heads never split (one wide head)", MHA,
           ((SPLIT_Q, "q = self.W_q(query).unsqueeze(1)"), (SPLIT_K, "k = self.W_k(key).unsqueeze(1)"),
            (SPLIT_V, "v = self.W_v(value).unsqueeze(1)")), (T_MHA,)),
    Mutant("mha: inline attention scaled by sqrt(d_model)", MHA, ((ATTEND, INLINE_D_MODEL),), (T_MHA,)),
    Mutant("mha: value defaults to query instead of key", MHA,
           (("value = key if value is None else value", "value = query if value is None else value"),), (T_MHA,)),
]
