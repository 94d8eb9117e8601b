from submissions import Mutant

# 7.1 FeedForward
_CHECK_ACT = 'if activation not in ("relu", "gelu"):'
_ACT = 'self.activation = F.relu if activation == "relu" else F.gelu'
_L1, _L2 = "self.linear1 = nn.Linear(d_model, d_ff)", "self.linear2 = nn.Linear(d_ff, d_model)"
_DROP = "self.dropout = nn.Dropout(dropout)"
_FWD = "return self.linear2(self.dropout(self.activation(self.linear1(x))))"
# 7.2 SwiGLUFeedForward
_GATE, _UP = "self.w_gate = nn.Linear(d_model, d_ff, bias=False)", "self.w_up = nn.Linear(d_model, d_ff, bias=False)"
_DOWN = "self.w_down = nn.Linear(d_ff, d_model, bias=False)"
_SWI = "return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))"
# 7.3 EncoderLayer
_NORM2 = "self.norm2 = LayerNorm(d_model)"
_FFN = "self.ffn = FeedForward(d_model, d_ff, dropout)"
_ATT = "x = pre_ln_residual(x, lambda h: self.dropout(self.self_attn(h, h, h, mask=mask)[0]), self.norm1)"
_FF = "return pre_ln_residual(x, lambda h: self.dropout(self.ffn(h)), self.norm2)"
_N = "\n        "
# 7.4 Encoder
_LAYERS = ("nn.ModuleList(EncoderLayer(d_model, num_heads, d_ff, dropout)\n"
           "                                    for _ in range(num_layers))")
_FINAL = "self.norm = LayerNorm(d_model)"
_LOOP = "for layer in self.layers:"
_STEP = "x = layer(x, mask)"
_RET = "return self.norm(x)"

FFN, SWIGLU, LAYER, ENCODER = "feed-forward", "swiglu", "encoder-layer", "encoder"
T71, T72, T73, T74 = ("test-feed-forward",), ("test-swiglu",), ("test-encoder-layer",), ("test-encoder",)

MUTANTS = [
    # --- 7.1 FeedForward: the objectives' mistakes
    Mutant("activation after the second linear layer", FFN,
           ((_FWD, "return self.activation(self.linear2(self.dropout(self.linear1(x))))"),), T71,
           hint="Did you apply the activation after the second linear layer?"),
    Mutant("no biases", FFN, ((_L1, "self.linear1 = nn.Linear(d_model, d_ff, bias=False)"),
                              (_L2, "self.linear2 = nn.Linear(d_ff, d_model, bias=False)")), T71,
           hint="Did you forget the biases?"),
    Mutant("d_ff ignored (hidden width d_model)", FFN,
           ((_L1, "self.linear1 = nn.Linear(d_model, d_model)"), (_L2, "self.linear2 = nn.Linear(d_model, d_model)")),
           T71, hint="Did you ignore d_ff?"),
    Mutant("no activation", FFN, ((_FWD, "return self.linear2(self.dropout(self.linear1(x)))"),), T71,
           hint="Did you forget the activation?"),
    Mutant("GELU's tanh approximation", FFN,
           ((_ACT, 'self.activation = F.relu if activation == "relu" else (lambda h: F.gelu(h, approximate="tanh"))'),),
           T71, hint="Did you use GELU's tanh approximation?"),
    Mutant("activation argument ignored (always ReLU)", FFN, ((_ACT, "self.activation = F.relu"),), T71,
           hint="Did you ignore the activation argument?"),
    Mutant("unknown activation accepted", FFN, ((_CHECK_ACT, "if False:"),), T71,
           hint="expected ValueError to be raised (unknown activation"),
    # dropout: in eval mode, ignored, misplaced, fixed
    Mutant("FFN: dropout in eval mode too (F.dropout)", FFN,
           ((_FWD, "return self.linear2(F.dropout(self.activation(self.linear1(x)), self.dropout.p))"),), T71,
           hint="Did you apply dropout in eval mode too?"),
    Mutant("dropout forgotten", FFN, ((_FWD, "return self.linear2(self.activation(self.linear1(x)))"),), T71,
           hint="Did you forget dropout?"),
    Mutant("dropout on the output", FFN,
           ((_FWD, "return self.dropout(self.linear2(self.activation(self.linear1(x))))"),), T71,
           hint="Did you apply dropout to the output?"),
    Mutant("dropout probability not stored (nn.Dropout())", FFN, ((_DROP, "self.dropout = nn.Dropout()"),), T71,
           hint="key 'train'"),
    # the general classes
    Mutant("FFN: result written into the input", FFN,
           ((_FWD, "return x.copy_(self.linear2(self.dropout(self.activation(self.linear1(x)))))"),), T71,
           hint="changed its input"),
    Mutant("FFN: result in float64", FFN,
           ((_FWD, "return self.linear2(self.dropout(self.activation(self.linear1(x)))).double()"),), T71,
           hint="expected dtype float32, got float64"),
    # --- 7.2 SwiGLUFeedForward
    Mutant("SiLU on the up branch", SWIGLU, ((_SWI, "return self.w_down(self.w_gate(x) * F.silu(self.w_up(x)))"),),
           T72, hint="Did you put the activation on the wrong branch?"),
    Mutant("sigmoid gate (GLU)", SWIGLU, ((_SWI, "return self.w_down(torch.sigmoid(self.w_gate(x)) * self.w_up(x))"),),
           T72, hint="Did you gate with a sigmoid?"),
    Mutant("GELU gate (GEGLU)", SWIGLU, ((_SWI, "return self.w_down(F.gelu(self.w_gate(x)) * self.w_up(x))"),), T72,
           hint="Did you gate with GELU?"),
    Mutant("branches added", SWIGLU, ((_SWI, "return self.w_down(F.silu(self.w_gate(x)) + self.w_up(x))"),), T72,
           hint="Did you add the branches?"),
    Mutant("SiLU after the product", SWIGLU, ((_SWI, "return self.w_down(F.silu(self.w_gate(x) * self.w_up(x)))"),),
           T72, hint="Did you apply SiLU after multiplying?"),
    Mutant("layers with biases", SWIGLU,
           ((_GATE, "self.w_gate = nn.Linear(d_model, d_ff)"), (_UP, "self.w_up = nn.Linear(d_model, d_ff)"),
            (_DOWN, "self.w_down = nn.Linear(d_ff, d_model)")), T72, hint="Did you give the layers biases?"),
    Mutant("dropout in training mode", SWIGLU,
           ((_SWI, "return self.w_down(F.dropout(F.silu(self.w_gate(x)) * self.w_up(x), 0.1, self.training))"),), T72,
           hint="key 'train'"),
    Mutant("SwiGLU: result written into the input", SWIGLU,
           ((_SWI, "return x.copy_(self.w_down(F.silu(self.w_gate(x)) * self.w_up(x)))"),), T72,
           hint="changed its input"),
    Mutant("SwiGLU: result in float64", SWIGLU, ((_SWI, "return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x)).double()"),),
           T72, hint="expected dtype float32, got float64"),
    # --- 7.3 EncoderLayer: the objectives' mistakes
    Mutant("FFN before attention (layer order wrong)", LAYER,
           ((_ATT, "x = pre_ln_residual(x, lambda h: self.dropout(self.ffn(h)), self.norm2)"),
            (_FF, _ATT.replace("x = ", "return ", 1))), T73, hint="Did you put the feed-forward network before attention?"),
    Mutant("residual adds the normalised input", LAYER,
           ((_ATT, "h = self.norm1(x)" + _N + "x = h + self.dropout(self.self_attn(h, h, h, mask=mask)[0])"),
            (_FF, "h = self.norm2(x)" + _N + "return h + self.dropout(self.ffn(h))")), T73,
           hint="Did you add the normalised input instead of the raw one?"),
    Mutant("FFN reads the attention output", LAYER,
           ((_ATT, "h = self.norm1(x)" + _N + "a = self.dropout(self.self_attn(h, h, h, mask=mask)[0])" + _N + "x = x + a"),
            (_FF, "return x + self.dropout(self.ffn(self.norm2(a)))")), T73,
           hint="Did you feed the FFN the attention's output?"),
    Mutant("no residual connections", LAYER,
           ((_ATT, "h = self.norm1(x)" + _N + "x = self.dropout(self.self_attn(h, h, h, mask=mask)[0])"),
            (_FF, "return self.dropout(self.ffn(self.norm2(x)))")), T73, hint="Did you forget the residual connections?"),
    Mutant("post-LN wiring", LAYER,
           ((_ATT, "x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask=mask)[0]))"),
            (_FF, "return self.norm2(x + self.dropout(self.ffn(x)))")), T73, hint="Did you wire it post-LN?"),
    Mutant("mask not passed to attention", LAYER, (("self.self_attn(h, h, h, mask=mask)", "self.self_attn(h, h, h)"),),
           T73, hint="Did you pass the mask on to self-attention?"),
    Mutant("norm1 used before the FFN too", LAYER, ((_FF, _FF.replace("self.norm2", "self.norm1")),), T73,
           hint="Did you use norm1 for both sub-layers?"),
    Mutant("one LayerNorm object for both sub-layers", LAYER, ((_NORM2, "self.norm2 = self.norm1"),), T73,
           hint="Did you create only one LayerNorm?"),
    Mutant("d_ff ignored", LAYER, ((_FFN, "self.ffn = FeedForward(d_model, d_model, dropout)"),), T73,
           hint="Did you ignore d_ff?"),
    # dropout
    Mutant("dropout not passed to the FFN", LAYER, ((_FFN, "self.ffn = FeedForward(d_model, d_ff)"),), T73,
           hint="Did you pass dropout on to the FeedForward?"),
    Mutant("layer: dropout in eval mode too (F.dropout)", LAYER,
           ((_ATT, _ATT.replace("self.dropout(self.self_attn(h, h, h, mask=mask)[0])",
                                "F.dropout(self.self_attn(h, h, h, mask=mask)[0], self.dropout.p)")),
            (_FF, _FF.replace("self.dropout(self.ffn(h))", "F.dropout(self.ffn(h), self.dropout.p)"))), T73,
           hint="Did you apply dropout in eval mode too?"),
    Mutant("no dropout on the sub-layers' outputs", LAYER,
           ((_ATT, "x = pre_ln_residual(x, lambda h: self.self_attn(h, h, h, mask=mask)[0], self.norm1)"),
            (_FF, "return pre_ln_residual(x, self.ffn, self.norm2)")), T73,
           hint="Did you forget self.dropout on the sub-layers' outputs?"),
    Mutant("no dropout on the attention's output only", LAYER,
           ((_ATT, "x = pre_ln_residual(x, lambda h: self.self_attn(h, h, h, mask=mask)[0], self.norm1)"),), T73,
           hint="Did you leave out self.dropout on the attention's output?"),
    Mutant("no dropout on the FFN's output only", LAYER,
           ((_FF, "return pre_ln_residual(x, lambda h: self.ffn(h), self.norm2)"),), T73,
           hint="Did you leave out self.dropout on the FFN's output?"),
    Mutant("dropout after the residual addition", LAYER,
           ((_ATT, "h = self.norm1(x)" + _N + "x = self.dropout(x + self.self_attn(h, h, h, mask=mask)[0])"),
            (_FF, "return self.dropout(x + self.ffn(self.norm2(x)))")), T73,
           hint="Did you apply dropout after adding the residual?"),
    Mutant("dropout probability fixed at 0.1", LAYER, (("self.dropout = nn.Dropout(dropout)", "self.dropout = nn.Dropout(0.1)"),),
           T73, hint="key 'train'"),
    # the general classes
    Mutant("residual added in place (x +=)", LAYER,
           ((_ATT, "h = self.norm1(x)" + _N + "x += self.dropout(self.self_attn(h, h, h, mask=mask)[0])"),), T73,
           hint="changed its input"),
    Mutant("layer: result in float64", LAYER, ((_FF, _FF + ".double()"),), T73, hint="expected dtype float32, got float64"),
    # --- 7.4 Encoder
    Mutant("final norm missing", ENCODER, ((_RET, "return x"),), T74, hint="Did you forget the final LayerNorm?"),
    Mutant("final norm never created", ENCODER, ((_FINAL, "pass"), (_RET, "return x")), T74,
           hint="Did you forget the final LayerNorm?"),
    Mutant("one layer object repeated (shared weights)", ENCODER,
           ((_LAYERS, "nn.ModuleList([EncoderLayer(d_model, num_heads, d_ff, dropout)] * num_layers)"),), T74,
           hint="Did you put one layer object in the list num_layers times"),
    Mutant("first layer run num_layers times", ENCODER, ((_STEP, "x = self.layers[0](x, mask)"),), T74,
           hint="Did you run the same layer num_layers times?"),
    Mutant("mask not passed to the layers", ENCODER, ((_STEP, "x = layer(x)"),), T74,
           hint="Did you pass the mask on to every layer?"),
    Mutant("final norm after every layer", ENCODER, ((_STEP, "x = self.norm(layer(x, mask))"), (_RET, "return x")),
           T74, hint="Did you apply the final norm after every layer?"),
    Mutant("layers in reverse order", ENCODER, ((_LOOP, "for layer in reversed(self.layers):"),), T74,
           hint="Did you run the layers in reverse order?"),
    Mutant("causal mask added", ENCODER,
           ((_LOOP, "causal = torch.triu(torch.full((x.shape[1], x.shape[1]), float('-inf')), diagonal=1)" + _N
             + "mask = causal if mask is None else mask + causal" + _N + _LOOP),), T74, hint="Did you add a causal mask?"),
    Mutant("dropout not passed to the layers", ENCODER,
           (("EncoderLayer(d_model, num_heads, d_ff, dropout)", "EncoderLayer(d_model, num_heads, d_ff)"),), T74,
           hint="Did you pass dropout on to the layers?"),
    # the general classes
    Mutant("each layer's output written into the input", ENCODER, ((_STEP, "x = x.copy_(layer(x, mask))"),), T74,
           hint="changed its input"),
    Mutant("encoder: result in float64", ENCODER, ((_RET, "return self.norm(x).double()"),), T74,
           hint="expected dtype float32, got float64"),
    Mutant("noise added in training mode", ENCODER,
           ((_STEP, "x = layer(x, mask) + (0.01 * torch.randn_like(x) if self.training else 0)"),), T74,
           hint="key 'train'"),
    # PyTorch's own layer with the student's weights copied in (`course.twins`): not the exercise
    Mutant("nn.TransformerEncoderLayer with the weights copied in", LAYER,
           ((_ATT, "from course.twins import load_twin, torch_attn_mask" + _N
             + "twin = load_twin(nn.TransformerEncoderLayer(x.shape[-1], self.self_attn.num_heads, "
               "self.ffn.linear1.out_features, self.dropout.p, norm_first=True, batch_first=True, dtype=x.dtype), "
               "dict(self.named_parameters())).train(self.training)" + _N
             + "m = torch_attn_mask(mask, x.shape[0], self.self_attn.num_heads, x.shape[1], x.shape[1])" + _N
             + "return twin(x, src_mask=None if m is None else m.to(x.dtype))"),), T73,
           hint="is not allowed in this exercise"),
]
