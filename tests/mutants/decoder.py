from submissions import Mutant

MASK, LAYER, STACK, MODEL = "causal-mask", "decoder-layer", "decoder", "transformer"
T81, T82, T83, T84 = ("test-causal-mask",), ("test-decoder-layer",), ("test-decoder",), ("test-transformer",)

TRIU = ".triu(diagonal=1)"
FILL = 'torch.zeros(n, n, dtype=dtype, device=device).masked_fill(future, float("-inf"))'
SELF = "x = x + self.dropout(self.self_attn(h, h, h, mask=tgt_mask)[0])"
CROSS = "out, weights = self.cross_attn(self.norm2(x), memory, memory, mask=memory_mask)"
CROSS_ADD = "x = x + self.dropout(out)"
FFN = "return x + self.dropout(self.ffn(self.norm3(x)))"
LOOP = "x = layer(x, memory, tgt_mask, memory_mask)"
FINAL = "return self.norm(x)"
ENCODE = "return self.encoder(src, src_mask)"
DECODE = "return self.decoder(tgt, memory, tgt_mask, memory_mask)"
FORWARD = "return self.decode(tgt, self.encode(src, src_mask), tgt_mask, memory_mask)"
_N = "\n        "
LEAK = "Did you pass tgt_mask to the self-attention?"

MUTANTS = [
    # --- 8.1 causal_mask: the objectives' mistakes and the general classes
    Mutant("mask off by one: the diagonal hidden too (j >= i)", MASK, ((TRIU, ".triu(diagonal=0)"),), T81,
           hint="Did you hide the diagonal too (j >= i)?"),
    Mutant("the past hidden instead of the future", MASK, ((TRIU, ".tril(diagonal=-1)"),), T81,
           hint="Did you hide the past instead of the future?"),
    Mutant("-1e9 instead of -inf", MASK, (('float("-inf")', "-1e9"),), T81,
           hint="Did you use a large negative number instead of -inf?"),
    Mutant("boolean mask returned", MASK, ((FILL, "future"),), T81, hint="Did you return a boolean mask?"),
    Mutant("dtype argument ignored", MASK, (("torch.zeros(n, n, dtype=dtype,", "torch.zeros(n, n,"),), T81,
           hint="expected dtype float64, got float32"),
    Mutant("device argument ignored", MASK,
           (("torch.ones(n, n, dtype=torch.bool, device=device)", "torch.ones(n, n, dtype=torch.bool)"),
            (FILL, 'torch.zeros(n, n, dtype=dtype).masked_fill(future, float("-inf"))')), T81,
           hint="Did you ignore the device argument?"),
    Mutant("n < 1 accepted", MASK, (("if n < 1:", "if False:"),), T81, hint="expected ValueError to be raised"),
    Mutant("one cached tensor returned by every call", MASK,
           (("from torch import nn\n", "from torch import nn\nimport functools\n"),
            ("def causal_mask(", "@functools.lru_cache(maxsize=None)\ndef causal_mask(")), T81,
           hint="Did you return the same tensor on every call (a cached mask)?"),
    Mutant("forbidden generate_square_subsequent_mask", MASK,
           ((FILL, "nn.Transformer.generate_square_subsequent_mask(n, dtype=dtype, device=device)"),), T81,
           hint="is not allowed in this exercise"),
    # --- 8.2 DecoderLayer: masks
    Mutant("future-token leak: no mask in the self-attention", LAYER,
           ((SELF, "x = x + self.dropout(self.self_attn(h, h, h)[0])"),), T82, hint=LEAK),
    Mutant("own causal mask, target padding ignored", LAYER,
           ((SELF, ("n = x.shape[1]\n        x = x + self.dropout(self.self_attn(h, h, h, mask=torch.triu("
                   "torch.full((n, n), float('-inf')), diagonal=1))[0])")),), T82,
           hint="Did you build a causal mask yourself and ignore tgt_mask?"),
    Mutant("source padding applied to the self-attention", LAYER,
           ((SELF, "x = x + self.dropout(self.self_attn(h, h, h, mask=memory_mask)[0])"),), T82,
           hint="Did you give the self-attention the source's padding mask"),
    Mutant("source padding not applied to the cross-attention", LAYER,
           ((CROSS, "out, weights = self.cross_attn(self.norm2(x), memory, memory)"),), T82,
           hint="Did you forget memory_mask in the cross-attention?"),
    Mutant("causal mask in the cross-attention", LAYER,
           ((CROSS, "out, weights = self.cross_attn(self.norm2(x), memory, memory, mask=tgt_mask)"),), T82,
           hint="Did you put the causal mask (tgt_mask) into the cross-attention?"),
    # wiring
    Mutant("queries from the encoder, keys and values from the decoder", LAYER,
           ((CROSS, "out, weights = self.cross_attn(memory, self.norm2(x), self.norm2(x), mask=memory_mask)"),), T82,
           hint="Did you take the queries from the encoder (memory)"),
    Mutant("residuals skipped", LAYER,
           ((SELF, "x = self.dropout(self.self_attn(h, h, h, mask=tgt_mask)[0])"),
            (CROSS_ADD, "x = self.dropout(out)"), (FFN, "return self.dropout(self.ffn(self.norm3(x)))")), T82,
           hint="Did you skip the residual connections?"),
    Mutant("cross-attention's residual skipped", LAYER, ((CROSS_ADD, "x = self.dropout(out)"),), T82,
           hint="Did you skip a residual connection?"),
    Mutant("sub-layer order: FFN before cross-attention", LAYER,
           (("        if has_cross:\n            out", ("        x = x + self.dropout(self.ffn(self.norm3(x)))\n"
                                                    "        if has_cross:\n            out")),
            (FFN, "return x")), T82, hint="Are the sub-layers in the right order?"),
    Mutant("norm1 reused before the cross-attention", LAYER,
           (("self.cross_attn(self.norm2(x)", "self.cross_attn(self.norm1(x)"),), T82, hint="Did you reuse norm1 before the cross-attention?"),
    Mutant("decoder-only layer keeps cross-attention", LAYER, (("if cross_attention:", "if True:"),), T82,
           hint="Did you keep cross_attn and norm2 in a decoder-only layer?"),
    Mutant("cross-attention weights kept with their graph", LAYER,
           (("self.cross_weights = weights.detach()", "self.cross_weights = weights"),), T82,
           hint="Did you detach the cross-attention weights you keep?"),
    Mutant("missing memory accepted", LAYER, (("if has_cross and memory is None:", "if False:"),), T82,
           hint="expected ValueError to be raised"),
    Mutant("memory_mask refused in a decoder-only layer", LAYER,
           (("if not has_cross and memory is not None:",
             "if not has_cross and (memory is not None or memory_mask is not None):"),), T82,
           hint="Did you refuse a memory_mask in a layer without cross-attention?"),
    Mutant("cross-attention weights not kept", LAYER, (("self.cross_weights = weights.detach()", "pass"),), T82,
           hint="['cross_weights']"),
    # the general classes
    Mutant("residual added in place", LAYER, ((SELF, "x += self.dropout(self.self_attn(h, h, h, mask=tgt_mask)[0])"),),
           T82, hint="changed its input"),
    Mutant("dropout 0.1 whatever the argument (training-mode difference)", LAYER,
           (("self.dropout = nn.Dropout(dropout)", "self.dropout = nn.Dropout(0.1)"),), T82, hint="key 'train'"),
    Mutant("result in float64", LAYER, ((FFN, "return (x + self.dropout(self.ffn(self.norm3(x)))).double()"),), T82,
           hint="expected dtype float32, got float64"),
    # dropout, each one the contract names on its own
    Mutant("no dropout on the self-attention's output", LAYER,
           ((SELF, "x = x + self.self_attn(h, h, h, mask=tgt_mask)[0]"),), T82,
           hint="Did you leave out dropout on the self-attention's output?"),
    Mutant("no dropout on the cross-attention's output", LAYER, ((CROSS_ADD, "x = x + out"),), T82,
           hint="Did you leave out dropout on the cross-attention's output?"),
    Mutant("no dropout on the FFN's output", LAYER, ((FFN, "return x + self.ffn(self.norm3(x))"),), T82,
           hint="Did you leave out dropout on the feed-forward network's output?"),
    Mutant("dropout not passed on to the FeedForward", LAYER,
           (("self.ffn = FeedForward(d_model, d_ff, dropout)", "self.ffn = FeedForward(d_model, d_ff)"),), T82,
           hint="Did you pass dropout on to the FeedForward?"),
    # --- 8.3 Decoder
    Mutant("final norm missing", STACK, ((FINAL, "return x"),), T83, hint="Did you forget the final norm?"),
    Mutant("final norm after every layer", STACK,
           ((LOOP, "x = self.norm(layer(x, memory, tgt_mask, memory_mask))"), (FINAL, "return x")), T83,
           hint="Did you apply the final norm after every layer?"),
    Mutant("one layer object repeated", STACK,
           (("nn.ModuleList(DecoderLayer(", "nn.ModuleList([DecoderLayer("),
            ("for _ in range(num_layers))", "] * num_layers)")), T83,
           hint="Did you put the same layer object in the list num_layers times"),
    Mutant("masks not passed to the layers", STACK, ((LOOP, "x = layer(x, memory)"),), T83,
           hint="Did you pass the masks on to every layer?"),
    Mutant("every layer fed the stack's input", STACK,
           ((LOOP, "out = layer(x, memory, tgt_mask, memory_mask)"), (FINAL, "return self.norm(out)")), T83,
           hint="Did you feed every layer the decoder's input x"),
    Mutant("stack's residual stream updated in place", STACK,
           ((LOOP, "x.copy_(layer(x, memory, tgt_mask, memory_mask))"),), T83, hint="changed its input"),
    Mutant("dropout not passed on to the layers", STACK,
           (("DecoderLayer(d_model, num_heads, d_ff, dropout, cross_attention)",
             "DecoderLayer(d_model, num_heads, d_ff, cross_attention=cross_attention)"),), T83,
           hint="Did you pass dropout on to the layers?"),
    # --- 8.4 Transformer
    Mutant("source padding not passed to the encoder", MODEL, ((ENCODE, "return self.encoder(src)"),), T84,
           hint="Did you pass src_mask to the encoder?"),
    Mutant("memory_mask dropped in forward", MODEL,
           ((FORWARD, "return self.decode(tgt, self.encode(src, src_mask), tgt_mask)"),), T84,
           hint="Did you pass memory_mask on to the decoder?"),
    Mutant("memory_mask dropped in decode", MODEL, ((DECODE, "return self.decoder(tgt, memory, tgt_mask)"),), T84,
           hint="Did you pass memory_mask on to the decoder?"),
    Mutant("memory_mask borrowed from src_mask when left out", MODEL,
           ((FORWARD, "return self.decode(tgt, self.encode(src, src_mask), tgt_mask, "
                      "src_mask if memory_mask is None else memory_mask)"),), T84,
           hint="Did you fill in a mask that was left out with the other one?"),
    Mutant("dropout not passed on to the decoder", MODEL,
           (("self.decoder = Decoder(num_decoder_layers, d_model, num_heads, d_ff, dropout)",
             "self.decoder = Decoder(num_decoder_layers, d_model, num_heads, d_ff)"),), T84,
           hint="Did you pass dropout on?"),
    Mutant("decoder attends to the source, encoder skipped", MODEL,
           ((FORWARD, "return self.decode(tgt, src, tgt_mask, memory_mask)"),), T84,
           hint="Did you give the decoder the source itself instead of the encoder's output?"),
    Mutant("encoder built with dropout 0.1 (training-mode difference)", MODEL,
           (("self.encoder = Encoder(num_encoder_layers, d_model, num_heads, d_ff, dropout)",
             "self.encoder = Encoder(num_encoder_layers, d_model, num_heads, d_ff, 0.1)"),), T84, hint="key 'train'"),
    # PyTorch's own layer with the student's weights copied in (`course.twins`): not the exercise
    Mutant("nn.TransformerDecoderLayer with the weights copied in", LAYER,
           ((SELF, "from course.twins import load_twin, torch_attn_mask" + _N
             + "heads, n, m = self.self_attn.num_heads, x.shape[1], memory.shape[1]" + _N
             + "twin = load_twin(nn.TransformerDecoderLayer(x.shape[-1], heads, self.ffn.linear1.out_features, "
               "self.dropout.p, norm_first=True, batch_first=True, dtype=x.dtype), "
               "dict(self.named_parameters())).train(self.training)" + _N
             + "tgt = torch_attn_mask(tgt_mask, x.shape[0], heads, n, n)" + _N
             + "mem = torch_attn_mask(memory_mask, x.shape[0], heads, n, m)" + _N
             + "return twin(x, memory, tgt_mask=None if tgt is None else tgt.to(x.dtype), "
               "memory_mask=None if mem is None else mem.to(x.dtype))"),), T82,
           hint="is not allowed in this exercise"),
]
