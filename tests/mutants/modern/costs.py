"""11.8 model_costs: the accounting's slips (a tied weight twice, full-width keys and values, the norms
forgotten, two SwiGLU matrices; a cache of keys only, of one layer, of one sequence, of every query head;
2N, the input embedding in N, no attention term; one moment, or moments at the weights' width)."""

from submissions import Mutant

COSTS, TC = "model-costs", ("test-model-costs",)
_KV = "kv_width = c.num_kv_heads * (c.d_model // c.num_heads)"
_NORMS = "per_layer = (2 * c.d_model "
_FFN = "+ 3 * c.d_model * c.d_ff)"
_PARAMS = "parameters = embedding * (1 if c.tie_embeddings else 2) + c.num_layers * per_layer + c.d_model"
_MULT = "multiplied = parameters - (0 if c.tie_embeddings else embedding)"
_CACHE = '"kv_cache_bytes": 2 * c.num_layers * kv_width * context * batch * bytes_per_value'
_FLOPS = '"train_flops_per_token": 6 * multiplied + 12 * c.num_layers * context * c.d_model'
_ADAM = '"adamw_bytes": 8 * parameters'

MUTANTS = [
    Mutant("costs: the tied weight counted twice", COSTS,
           ((_PARAMS, "parameters = 2 * embedding + c.num_layers * per_layer + c.d_model"),), TC,
           hint="Did you count the tied weight twice?"),
    Mutant("costs: keys and values at num_heads heads", COSTS, ((_KV, "kv_width = c.d_model"),), TC,
           hint="Did you give W_k and W_v num_heads heads?"),
    Mutant("costs: no norm gains", COSTS,
           ((_NORMS, "per_layer = (0 * c.d_model "), (_PARAMS, _PARAMS.removesuffix(" + c.d_model"))), TC,
           hint="Did you leave out the RMSNorm gains?"),
    Mutant("costs: SwiGLU with two matrices", COSTS, ((_FFN, "+ 2 * c.d_model * c.d_ff)"),), TC,
           hint="Did you give SwiGLU two matrices?"),
    Mutant("costs: keys cached, not values", COSTS, ((_CACHE, _CACHE.replace("2 * c.num_layers", "c.num_layers")),),
           TC, hint="Did you cache the keys only?"),
    Mutant("costs: one layer's cache", COSTS, ((_CACHE, _CACHE.replace("2 * c.num_layers * ", "2 * ")),), TC,
           hint="Did you cache one layer?"),
    Mutant("costs: one sequence's cache", COSTS, ((_CACHE, _CACHE.replace(" * batch", "")),), TC,
           hint="Did you cache one sequence?"),
    Mutant("costs: every query head cached", COSTS, ((_CACHE, _CACHE.replace("kv_width", "c.d_model")),), TC,
           hint="Did you cache num_heads heads?"),
    Mutant("costs: 2N (the forward pass)", COSTS, ((_FLOPS, _FLOPS.replace("6 * multiplied", "2 * multiplied")),), TC,
           hint="Did you count 2N?"),
    Mutant("costs: the input embedding in N", COSTS, ((_MULT, "multiplied = parameters"),), TC,
           hint="Did you count the input embedding in N?"),
    Mutant("costs: a tied output layer left out of N", COSTS, ((_MULT, "multiplied = parameters - embedding"),), TC,
           hint="Did you leave the tied output layer out of N?"),
    Mutant("costs: no attention term", COSTS,
           ((_FLOPS, '"train_flops_per_token": 6 * multiplied'),), TC, hint="Did you leave out the attention scores?"),
    Mutant("costs: one moment", COSTS, ((_ADAM, '"adamw_bytes": 4 * parameters'),), TC,
           hint="Did you keep one moment"),
    Mutant("costs: moments at bytes_per_value", COSTS, ((_ADAM, '"adamw_bytes": 2 * bytes_per_value * parameters'),),
           TC, hint="or store the moments at bytes_per_value?"),
    Mutant("costs: floats (true division)", COSTS,
           (('"weight_bytes": parameters * bytes_per_value', '"weight_bytes": parameters * bytes_per_value / 1'),), TC,
           hint="int"),
]
