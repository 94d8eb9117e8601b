from submissions import Mutant

_SIN = "pe[:, 0::2] = torch.sin(angle)"
_COS = "pe[:, 1::2] = torch.cos(angle)"
_ANGLE = "angle = pos / base ** (2 * i / d_model)"
_CHECK = "if d_model <= 0 or d_model % 2 != 0:"
_POS = "pos = torch.arange(seq_len, dtype=torch.float64)"
_I = "i = torch.arange(d_model // 2, dtype=torch.float64)"
_EMPTY = "pe = torch.empty(seq_len, d_model, dtype=torch.float64)"
_THETA = "theta = k / base ** (2 * i / d_model)"
_ADD = "return x + self.pe[:seq_len]"
_BUFFER = 'self.register_buffer("pe", sinusoidal_encoding(max_len, d_model, base))'

T31, T32, T33 = "test-sinusoidal-encoding", "test-offset-matrix", "test-positional-encoding"

MUTANTS = [
    # --- 3.1 sinusoidal_encoding
    Mutant("sin and cos swapped", "sinusoidal-encoding",
           ((_SIN, "pe[:, 0::2] = torch.cos(angle)"), (_COS, "pe[:, 1::2] = torch.sin(angle)")), (T31,)),
    Mutant("exponent i/d instead of 2i/d", "sinusoidal-encoding",
           ((_ANGLE, "angle = pos / base ** (i / d_model)"),), (T31,)),
    Mutant("dimension index 2i used where the formula has i", "sinusoidal-encoding",
           ((_I, "i = torch.arange(0, d_model, 2, dtype=torch.float64)"),), (T31,)),
    Mutant("cosine uses its own dimension index in the exponent", "sinusoidal-encoding",
           ((_COS, "pe[:, 1::2] = torch.cos(pos / base ** ((2 * i + 1) / d_model))"),), (T31,)),
    Mutant("pos and i swapped", "sinusoidal-encoding",
           ((_ANGLE, "angle = i / base ** (2 * pos / d_model)"),), (T31,)),
    Mutant("sines then cosines (concatenated, not interleaved)", "sinusoidal-encoding",
           ((_SIN + "\n    " + _COS, "pe = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)"),), (T31,)),
    Mutant("odd d_model accepted silently", "sinusoidal-encoding",
           ((_CHECK, "if d_model <= 0:"),
            (_I, "i = torch.arange((d_model + 1) // 2, dtype=torch.float64)"),
            (_COS, "pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])")), (T31,)),
    Mutant("computed in float32 (precision at long lengths)", "sinusoidal-encoding",
           ((_POS, "pos = torch.arange(seq_len, dtype=torch.float32)"),
            (_I, "i = torch.arange(d_model // 2, dtype=torch.float32)"),
            (_EMPTY, "pe = torch.empty(seq_len, d_model, dtype=torch.float32)")), (T31,)),
    Mutant("computed in float16", "sinusoidal-encoding",
           ((_POS, "pos = torch.arange(seq_len, dtype=torch.float16)"),
            (_I, "i = torch.arange(d_model // 2, dtype=torch.float16)"),
            (_EMPTY, "pe = torch.empty(seq_len, d_model, dtype=torch.float16)")), (T31,)),
    Mutant("returns float64", "sinusoidal-encoding", (("return pe.to(torch.float32)", "return pe"),), (T31,)),
    # --- 3.2 offset_matrix
    Mutant("rotation transposed (column convention)", "offset-matrix",
           (("m[even, odd] = -sin", "m[even, odd] = sin"), ("m[odd, even] = sin", "m[odd, even] = -sin")), (T32,)),
    Mutant("offset matrix with exponent i/d", "offset-matrix",
           ((_THETA, "theta = k / base ** (i / d_model)"),), (T32,)),
    Mutant("sign of k ignored", "offset-matrix", ((_THETA, "theta = abs(k) / base ** (2 * i / d_model)"),), (T32,)),
    Mutant("frequency forgotten (every pair turns by k)", "offset-matrix",
           ((_THETA, "theta = k * torch.ones_like(i)"),), (T32,)),
    # --- 3.3 PositionalEncoding
    Mutant("seq-first slice: length from x.size(0)", "positional-encoding",
           (("seq_len = x.size(1)", "seq_len = x.size(0)"), (_ADD, "return x + self.pe[:seq_len].unsqueeze(1)")),
           (T33,)),
    Mutant("table sliced to d_model rows", "positional-encoding",
           ((_ADD, "return x + self.pe[: x.size(-1)]"),), (T33,)),
    Mutant("x scaled by sqrt(d_model) before adding", "positional-encoding",
           ((_ADD, "return x * math.sqrt(x.size(-1)) + self.pe[:seq_len]"),), (T33,)),
    Mutant("table stored as nn.Parameter", "positional-encoding",
           ((_BUFFER, "self.pe = nn.Parameter(sinusoidal_encoding(max_len, d_model, base))"),), (T33,)),
    Mutant("table stored as a plain attribute", "positional-encoding",
           ((_BUFFER, "self.pe = sinusoidal_encoding(max_len, d_model, base)"),), (T33,)),
    Mutant("no length check", "positional-encoding",
           (("if seq_len > self.max_len:", "if False:"),), (T33,)),
    Mutant("length check off by one", "positional-encoding",
           (("if seq_len > self.max_len:", "if seq_len >= self.max_len:"),), (T33,)),
]
