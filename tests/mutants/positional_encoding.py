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
           ((_SIN, "pe[:, 0::2] = torch.cos(angle)"), (_COS, "pe[:, 1::2] = torch.sin(angle)")), (T31,), hint='Did you swap sin and cos?'),
    Mutant("exponent i/d instead of 2i/d", "sinusoidal-encoding",
           ((_ANGLE, "angle = pos / base ** (i / d_model)"),), (T31,), hint='Did you use the exponent i/d?'),
    Mutant("dimension index 2i used where the formula has i", "sinusoidal-encoding",
           ((_I, "i = torch.arange(0, d_model, 2, dtype=torch.float64)"),), (T31,), hint='Did you put the dimension index where the formula has the pair index?'),
    Mutant("cosine uses its own dimension index in the exponent", "sinusoidal-encoding",
           ((_COS, "pe[:, 1::2] = torch.cos(pos / base ** ((2 * i + 1) / d_model))"),), (T31,), hint='must share one frequency'),
    Mutant("pos and i swapped", "sinusoidal-encoding",
           ((_ANGLE, "angle = i / base ** (2 * pos / d_model)"),), (T31,), hint='Did you swap pos and i?'),
    Mutant("sines then cosines (concatenated, not interleaved)", "sinusoidal-encoding",
           ((_SIN + "\n    " + _COS, "pe = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)"),), (T31,), hint='Did you put all sines first'),
    Mutant("odd d_model accepted silently", "sinusoidal-encoding",
           ((_CHECK, "if d_model <= 0:"),
            (_I, "i = torch.arange((d_model + 1) // 2, dtype=torch.float64)"),
            (_COS, "pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])")), (T31,), hint='expected ValueError to be raised (d_model must be even'),
    Mutant("computed in float32 (precision at long lengths)", "sinusoidal-encoding",
           ((_POS, "pos = torch.arange(seq_len, dtype=torch.float32)"),
            (_I, "i = torch.arange(d_model // 2, dtype=torch.float32)"),
            (_EMPTY, "pe = torch.empty(seq_len, d_model, dtype=torch.float32)")), (T31,), hint='this is floating-point precision'),
    Mutant("computed in float16", "sinusoidal-encoding",
           ((_POS, "pos = torch.arange(seq_len, dtype=torch.float16)"),
            (_I, "i = torch.arange(d_model // 2, dtype=torch.float16)"),
            (_EMPTY, "pe = torch.empty(seq_len, d_model, dtype=torch.float16)")), (T31,), hint='compute in float64'),
    Mutant("returns float64", "sinusoidal-encoding", (("return pe.to(torch.float32)", "return pe"),), (T31,), hint='expected dtype float32, got float64'),
    # --- 3.2 offset_matrix
    Mutant("rotation transposed (column convention)", "offset-matrix",
           (("m[even, odd] = -sin", "m[even, odd] = sin"), ("m[odd, even] = sin", "m[odd, even] = -sin")), (T32,), hint='Your matrix moves PE(pos) to PE(pos - k)'),
    Mutant("offset matrix with exponent i/d", "offset-matrix",
           ((_THETA, "theta = k / base ** (i / d_model)"),), (T32,), hint='Did you use the exponent i/d?'),
    Mutant("offset matrix computed in float32", "offset-matrix",
           (("i = torch.arange(d_model // 2, dtype=torch.float64)\n    theta",
             "i = torch.arange(d_model // 2, dtype=torch.float32)\n    theta"),
            ("m = torch.zeros(d_model, d_model, dtype=torch.float64)",
             "m = torch.zeros(d_model, d_model, dtype=torch.float32)")), (T32,),
           hint="did you compute the angles in float32?"),
    Mutant("base not passed on to the table", "positional-encoding",
           ((_BUFFER, 'self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))'),), (T33,),
           hint="Did you pass base on to sinusoidal_encoding?"),
    Mutant("sign of k ignored", "offset-matrix", ((_THETA, "theta = abs(k) / base ** (2 * i / d_model)"),), (T32,), hint='you dropped the sign of k'),
    Mutant("frequency forgotten (every pair turns by k)", "offset-matrix",
           ((_THETA, "theta = k * torch.ones_like(i)"),), (T32,), hint='did you forget the frequency?'),
    # --- 3.3 PositionalEncoding
    Mutant("seq-first slice: length from x.size(0)", "positional-encoding",
           (("seq_len = x.size(1)", "seq_len = x.size(0)"), (_ADD, "return x + self.pe[:seq_len].unsqueeze(1)")),
           (T33,), hint='Did you take the length from x.size(0)?'),
    Mutant("table sliced to d_model rows", "positional-encoding",
           ((_ADD, "return x + self.pe[: x.size(-1)]"),), (T33,), hint='with seq_len = x.size(1)'),
    Mutant("x scaled by sqrt(d_model) before adding", "positional-encoding",
           ((_ADD, "return x * math.sqrt(x.size(-1)) + self.pe[:seq_len]"),), (T33,), hint='Did you scale x by sqrt(d_model)?'),
    Mutant("table stored as nn.Parameter", "positional-encoding",
           ((_BUFFER, "self.pe = nn.Parameter(sinusoidal_encoding(max_len, d_model, base))"),), (T33,), hint='Did you store the table as an nn.Parameter?'),
    Mutant("table stored as a plain attribute", "positional-encoding",
           ((_BUFFER, "self.pe = sinusoidal_encoding(max_len, d_model, base)"),), (T33,), hint='Did you store the table as a plain attribute'),
    Mutant("no length check", "positional-encoding",
           (("if seq_len > self.max_len:", "if False:"),), (T33,), hint='Raise ValueError exactly when x.size(1) > max_len'),
    Mutant("length check off by one", "positional-encoding",
           (("if seq_len > self.max_len:", "if seq_len >= self.max_len:"),), (T33,), hint='Off by one'),
    # --- the classes of hole every chapter must close: inputs changed in place, dtypes, training mode,
    # contract clauses (a non-positive d_model)
    Mutant("d_model 0 or negative accepted", "sinusoidal-encoding",
           ((_CHECK, "if d_model % 2 != 0:"),), (T31,), hint="d_model must be positive"),
    Mutant("offset matrix returned in float64", "offset-matrix",
           (("return m.to(torch.float32)", "return m"),), (T32,), hint="expected dtype float32, got float64"),
    Mutant("table added to x in place", "positional-encoding",
           ((_ADD, "x += self.pe[:seq_len]\n        return x"),), (T33,), hint="changed its input"),
    Mutant("dropout in training mode", "positional-encoding",
           (("self.max_len = max_len", "self.max_len = max_len\n        self.dropout = nn.Dropout(0.1)"),
            (_ADD, "return self.dropout(x + self.pe[:seq_len])")), (T33,), hint="the module has no dropout"),
    Mutant("table buffer stored in float64", "positional-encoding",
           ((_BUFFER, 'self.register_buffer("pe", sinusoidal_encoding(max_len, d_model, base).double())'),), (T33,),
           hint="Did you store the table in float64?"),
]
