"""11.6 ModernDecoderLayer and 11.7 ModernLM: realistic wrong answers."""

from submissions import Mutant

LAYER, T6 = "modern-layer", ("test-modern-layer",)
LM, T7 = "modern-lm", ("test-modern-lm",)
_NORM1, _NORM2 = "self.norm1 = RMSNorm(d_model, eps)", "self.norm2 = RMSNorm(d_model, eps)"
_ATTN = "self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads, rope_base)"
_SUB1 = "attended, cache = self.attn(self.norm1(x), cache)\n        h = x + attended"
_SUB2 = "return h + self.ffn(self.norm2(h)), cache"
_TIE = "self.output.weight = self.embedding.weight"
_LOOP = "for layer, cache in zip(self.layers, caches or [None] * len(self.layers)):"
_EMB = "x = self.embedding(ids)"

MUTANTS = [
    # --- 11.6 ModernDecoderLayer
    Mutant("post-norm", LAYER, ((_SUB1, "attended, cache = self.attn(x, cache)\n        h = self.norm1(x + attended)"),
                                (_SUB2, "return self.norm2(h + self.ffn(h)), cache")), T6,
           hint="Did you normalise after the residual sums"),
    Mutant("residual around the norm", LAYER,
           ((_SUB1, "x = self.norm1(x)\n        attended, cache = self.attn(x, cache)\n        h = x + attended"),
            (_SUB2, "h = self.norm2(h)\n        return h + self.ffn(h), cache")), T6,
           hint="Did you start the residual sums from the normalised input?"),
    Mutant("one norm shared", LAYER, ((_NORM2, "self.norm2 = self.norm1"),), T6, hint="Did you use one norm twice?"),
    Mutant("eps not passed on", LAYER, ((_NORM1, "self.norm1 = RMSNorm(d_model)"),
                                        (_NORM2, "self.norm2 = RMSNorm(d_model)")), T6,
           hint="Did you pass eps on to the norms?"),
    Mutant("rope_base not passed on", LAYER,
           ((_ATTN, "self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads)"),), T6,
           hint="Did you pass rope_base on to the attention?"),
    Mutant("LayerNorm instead of RMSNorm", LAYER, ((_NORM1, "self.norm1 = nn.LayerNorm(d_model, eps)"),
                                                   (_NORM2, "self.norm2 = nn.LayerNorm(d_model, eps)")), T6,
           hint="Did you use LayerNorm?"),
    # --- 11.7 ModernLM
    Mutant("no final norm", LM, (("return self.output(self.norm(x)), new", "return self.output(x), new"),), T7,
           hint="Did you leave out the final norm?"),
    Mutant("untied output layer", LM, ((_TIE, "pass"),), T7, hint="Did you tie the weights?"),
    Mutant("tied although tie_embeddings=False", LM, (("if c.tie_embeddings:", "if True:"),), T7,
           hint="Did you tie the weights although tie_embeddings=False?"),
    Mutant("caches ignored", LM, ((_LOOP, "for layer, cache in zip(self.layers, [None] * len(self.layers)):"),), T7,
           hint="Did you ignore the caches?"),
    Mutant("every layer given the first layer's cache", LM,
           ((_LOOP, "for layer, cache in zip(self.layers, [caches[0]] * len(self.layers) if caches else "
                    "[None] * len(self.layers)):"),), T7,
           hint="Did you give every layer the first layer's cache?"),
    Mutant("the caller's list of caches updated in place", LM,
           (("new = []\n        " + _LOOP + "\n            x, cache = layer(x, cache)\n            new.append(cache)",
             "new = caches if caches is not None else [None] * len(self.layers)\n"
             "        for i, layer in enumerate(self.layers):\n            x, new[i] = layer(x, new[i])"),), T7,
           hint="the caller's list of caches is left unchanged"),
    Mutant("positions added at the embedding", LM,
           ((_EMB, "from course.reference.positional_encoding import sinusoidal_encoding\n        "
                   "x = self.embedding(ids) + sinusoidal_encoding(ids.shape[1], self.embedding.embedding_dim)"),), T7,
           hint="Did you add positions at the embedding?"),
    Mutant("embedding scaled by sqrt(d_model)", LM,
           ((_EMB, "x = self.embedding(ids) * self.embedding.embedding_dim ** 0.5"),), T7,
           hint="Did you scale the embedding by sqrt(d_model)"),
    Mutant("output layer with a bias", LM,
           (("self.output = nn.Linear(c.d_model, c.vocab_size, bias=False)",
             "self.output = nn.Linear(c.d_model, c.vocab_size)"),), T7,
           hint="Did you give the output layer a bias?"),
]
