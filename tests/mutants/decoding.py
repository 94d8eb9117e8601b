from submissions import Mutant

# 9.1 OutputProjection
_TIE = "self.weight = embedding.weight  # the same Parameter object: tied, not copied"
_BIAS = "self.bias = nn.Parameter(torch.zeros(vocab_size))"
_PROJ = "return x @ self.weight.T + self.bias"
_SHAPE = "if tuple(embedding.weight.shape) != (vocab_size, d_model):"
# 9.2 log_softmax
_SHIFT = "shifted = logits - logits.amax(dim=dim, keepdim=True)"
_LSM = "return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))"
# 9.3 filters
_KTH = "kth = torch.topk(logits, k, dim=-1).values[..., -1:]"
_KMASK = 'return logits.masked_fill(logits < kth, float("-inf"))'
_CROSS = "crossing = (running < p).sum(dim=-1, keepdim=True)"
_PCHECK = "if not 0 < p <= 1:"
_PMASK = 'return logits.masked_fill(probs < threshold, float("-inf"))'
# 9.4 sample
_SCALE = "scaled = logits / temperature           # before the softmax"
_PROBS = "probs = torch.softmax(scaled, dim=-1)"
_GREEDY = "if temperature == 0:\n        return logits.argmax(dim=-1)"
_DRAW = "return torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]"
# 9.5 generate
_LOOP = "for _ in range(max_new_tokens):"
_PAD = "token = torch.where(done, torch.full_like(token, pad), token)"
_DONE = "done = done | (token == eos)"
_NEG = "if max_new_tokens < 0:"
_CALL = "token = sample(next_token_logits(seq), temperature, top_k, top_p, generator)"
# 9.6 beam search
_EXPAND = "log_probs = log_softmax(next_token_logits(beams), dim=-1)     # (n_live, vocab)"
_ENDS = "ends = tokens == eos"
_NORM = "return item[1] / ((5 + len(item[0]) - t0) / 6) ** length_penalty"
_BATCH = "if prompt.dim() != 2 or prompt.shape[0] != 1:"
_TOP = "top = torch.topk(candidates, min(beam_size, candidates.numel())).indices"
_SIZES = "if beam_size < 1 or max_new_tokens < 1:"
# 9.7 kv cache
_CAT_K = "k = torch.cat([past[0], k], dim=2)       # along the sequence axis"
_CAT_V = "v = torch.cat([past[1], v], dim=2)"
_ATTEND = "out, _ = scaled_dot_product_attention(q, k, v, mask)"
_POS = "x = model.embedding(ids) + model.positions.pe[start:start + ids.shape[1]]"
_MASK = 'mask = torch.triu(torch.full((n, total), float("-inf")), diagonal=total - n + 1)'

PROJ, LSM, FILT, SAMPLE, GEN, BEAM, KV = ("output-projection", "log-softmax", "filters", "sample", "generate",
                                          "beam-search", "kv-cache")
T1, T2, T3, T4, T5, T6, T7 = ((f"test-{c}",) for c in (PROJ, LSM, FILT, SAMPLE, GEN, BEAM, KV))

MUTANTS = [
    # --- 9.1 the output projection
    Mutant("bias forgotten", PROJ, ((_PROJ, "return x @ self.weight.T"),), T1, hint="Did you forget the bias?"),
    Mutant("embedding weight copied, not tied", PROJ,
           ((_TIE, "self.weight = nn.Parameter(embedding.weight.detach().clone())"),), T1,
           hint="Did you copy the embedding's weight"),
    Mutant("dropout in training mode", PROJ,
           ((_PROJ, "return nn.functional.dropout(x @ self.weight.T + self.bias, 0.1, self.training)"),), T1,
           hint="key 'train'"),
    Mutant("bias initialised to ones", PROJ, ((_BIAS, "self.bias = nn.Parameter(torch.ones(vocab_size))"),), T1,
           hint="initialised to zeros"),
    Mutant("mismatched embedding accepted", PROJ, ((_SHAPE, "if False:"),), T1,
           hint="expected ValueError to be raised"),
    # --- 9.2 log-softmax
    Mutant("log-softmax over the first axis", LSM,
           ((_SHIFT, "shifted = logits - logits.amax(dim=0, keepdim=True)"),
            (_LSM, "return shifted - torch.log(torch.exp(shifted).sum(dim=0, keepdim=True))")), T2,
           hint="Did you take the softmax over the first axis?"),
    Mutant("log-softmax over the last axis whatever dim says", LSM,
           ((_SHIFT, "shifted = logits - logits.amax(dim=-1, keepdim=True)"),
            (_LSM, "return shifted - torch.log(torch.exp(shifted).sum(dim=-1, keepdim=True))")), T2,
           hint="Did you take the softmax over the wrong axis?"),
    Mutant("maximum not subtracted (overflows)", LSM, ((_SHIFT, "shifted = logits"),), T2,
           hint="exp overflows to inf"),
    Mutant("returns the softmax", LSM,
           ((_LSM, "return torch.exp(shifted) / torch.exp(shifted).sum(dim=dim, keepdim=True)"),), T2,
           hint="Did you return the softmax?"),
    Mutant("log-sum forgotten", LSM, ((_LSM, "return shifted"),), T2, hint="Did you forget to subtract log(sum"),
    Mutant("result cast to float32", LSM,
           ((_LSM, "return (shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))).float()"),), T2, hint="expected dtype float64, got float32"),
    Mutant("calls torch.log_softmax (not allowed)", LSM, ((_LSM, "return torch.log_softmax(logits, dim=dim)"),), T2,
           hint="is not allowed in this exercise"),
    # --- 9.3 the filters
    Mutant("top-k keeps k + 1 tokens", FILT,
           ((_KTH, "kth = torch.topk(logits, min(k + 1, logits.shape[-1]), dim=-1).values[..., -1:]"),), T3,
           hint="Did you keep k + 1 tokens?"),
    Mutant("top-k fills 0 instead of -inf (no renormalisation)", FILT,
           ((_KMASK, "return logits.masked_fill(logits < kth, 0.0)"),), T3,
           hint="Did you set the removed logits to 0?"),
    Mutant("top-k filters the logits in place", FILT,
           ((_KMASK, 'return logits.masked_fill_(logits < kth, float("-inf"))'),), T3, hint="changed its input"),
    Mutant("top-k breaks ties by index", FILT,
           ((_KMASK, ("keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, torch.topk(logits, k).indices, True)"
                      '\n    return logits.masked_fill(~keep, float("-inf"))')),), T3,
           hint="Did you keep exactly k tokens (by index)?"),
    Mutant("top-p drops the token that crosses p", FILT,
           ((_CROSS, "crossing = (running < p).sum(dim=-1, keepdim=True).sub(1).clamp(min=0)"),),
           T3, hint="Did you drop the token that crosses p?"),
    Mutant("top-p keeps one token too many", FILT,
           ((_CROSS, "crossing = (running < p).sum(dim=-1, keepdim=True) + 1"),), T3,
           hint="Did you keep one token too many?"),
    Mutant("top-p tests the mass before each token, cumsum - probs < p", FILT,
           ((_CROSS, "crossing = (running - sorted_probs < p).sum(dim=-1, keepdim=True) - 1"),), T3,
           hint="Where p equals a running sum exactly: did you test the mass *before* each token"),
    Mutant("top-p fills 0 instead of -inf", FILT, ((_PMASK, "return logits.masked_fill(probs < threshold, 0.0)"),), T3,
           hint="Did you set the removed logits to 0?"),
    Mutant("top-p accepts p > 1", FILT, ((_PCHECK, "if not 0 < p:"),), T3, hint="expected ValueError to be raised"),
    # --- 9.4 sample
    Mutant("temperature defaults to 0 (greedy)", SAMPLE,
           (("temperature: float = 1.0, top_k", "temperature: float = 0.0, top_k"),), T4,
           hint="Did you give temperature another default than 1.0?"),
    Mutant("temperature applied after the softmax", SAMPLE,
           ((_SCALE, "scaled = logits"), (_PROBS, "probs = torch.softmax(scaled, dim=-1) / temperature")), T4,
           hint="Did you apply the temperature after the softmax?"),
    Mutant("temperature 0 divides by zero", SAMPLE, ((_GREEDY, "pass"),), T4,
           hint="Temperature 0 means greedy"),
    Mutant("negative temperature accepted", SAMPLE, (("if temperature < 0:", "if False:"),), T4,
           hint="expected ValueError to be raised (temperature must be >= 0)"),
    Mutant("tokens returned as int32", SAMPLE, ((_DRAW, _DRAW + ".int()"),), T4, hint="expected dtype int64, got int32"),
    Mutant("a generator of its own when none is given", SAMPLE,
           ((_DRAW, _DRAW.replace("generator=generator", "generator=generator or torch.Generator().manual_seed(0)")),),
           T4, hint="Did you make a generator of your own when none is given?"),
    # --- 9.5 generate
    Mutant("end token ignored (generation continues past eos)", GEN, ((_DONE, "done = done"),), T5,
           hint="Did you ignore the end token?"),
    Mutant("finished rows keep growing", GEN, ((_PAD, "pass"),), T5, hint="Did finished rows keep growing?"),
    Mutant("one step past max_new_tokens", GEN, ((_LOOP, "for _ in range(max_new_tokens + 1):"),), T5,
           hint="Did you generate one token too many?"),
    Mutant("model given the last token only", GEN,
           ((_CALL, "token = sample(next_token_logits(seq[:, -1:]), temperature, top_k, top_p, generator)"),), T5,
           hint="Did you give the model only the last token?"),
    Mutant("generate's temperature defaults to 1 (samples when left out)", GEN,
           (("eos: int, pad: int = 0, temperature: float = 0.0,", "eos: int, pad: int = 0, temperature: float = 1.0,"),),
           T5, hint="generate: prompt (batch, t0) int64"),
    Mutant("negative max_new_tokens accepted", GEN, ((_NEG, "if False:"),), T5,
           hint="expected ValueError to be raised (max_new_tokens must be >= 0)"),
    # --- 9.6 beam search
    Mutant("no length normalisation", BEAM, ((_NORM, "return item[1]"),), T6, hint="Did you ignore length_penalty?"),
    Mutant("length penalty n ** alpha", BEAM, ((_NORM, "return item[1] / (len(item[0]) - t0) ** length_penalty"),), T6,
           hint="Did you divide by n ** length_penalty?"),
    Mutant("only the best beam's children", BEAM,
           ((_EXPAND, "beams, scores = beams[:1], scores[:1]\n        " + _EXPAND),), T6,
           hint="Did you expand only the best beam?"),
    Mutant("finished hypotheses keep growing", BEAM, ((_ENDS, "ends = torch.zeros_like(tokens, dtype=torch.bool)"),),
           T6, hint="Did you keep expanding hypotheses that ended with eos?"),
    Mutant("the beam shrinks for good as hypotheses finish", BEAM,
           ((_ENDS, _ENDS + "\n        beam_size -= int(ends.sum())"),), T6,
           hint="Did the beam shrink for good as hypotheses finished?"),
    Mutant("a finished child replaced by the next best live one", BEAM,
           ((_TOP, "order = candidates.argsort(descending=True)\n"
                   "        is_eos, rank = order % vocab == eos, torch.arange(len(order))\n"
                   "        top = order[(is_eos & (rank < beam_size)) | (~is_eos & ((~is_eos).cumsum(0) <= beam_size))]"),),
           T6, hint="Did you replace a finished child by the next best live one?"),
    Mutant("max_new_tokens < 1 accepted", BEAM, ((_SIZES, "if beam_size < 1:"),), T6,
           hint="expected ValueError to be raised"),
    Mutant("a batch of prompts accepted", BEAM, ((_BATCH, "if prompt.dim() != 2:"),), T6,
           hint="expected ValueError to be raised"),
    # --- 9.7 the key-value cache
    Mutant("cache concatenated on the heads axis", KV,
           ((_CAT_K, "k = torch.cat([past[0], k], dim=1)"), (_CAT_V, "v = torch.cat([past[1], v], dim=1)")), T7,
           hint="along the sequence axis (dim=2)"),
    Mutant("new keys put before the cached ones", KV,
           ((_CAT_K, "k = torch.cat([k, past[0]], dim=2)"), (_CAT_V, "v = torch.cat([v, past[1]], dim=2)")), T7,
           hint="Did you put the new keys before the cached ones?"),
    Mutant("positions restart at 0", KV, ((_POS, "x = model.embedding(ids) + model.positions.pe[:ids.shape[1]]"),), T7,
           hint="Did you restart the positions at 0?"),
    Mutant("no causal mask among the new positions", KV, ((_ATTEND, "out, _ = scaled_dot_product_attention(q, k, v)"),),
           T7, hint="Did you leave out the causal mask among the new positions?"),
    Mutant("causal mask as if the new positions came first", KV,
           ((_MASK, 'mask = torch.triu(torch.full((n, total), float("-inf")), diagonal=1)'),), T7,
           hint="Did you build the causal mask as if the new positions came first?"),
]
