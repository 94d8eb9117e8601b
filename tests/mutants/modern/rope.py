"""11.2 apply_rope: the syllabus's mistakes (split halves, the wrong sign, wrong frequencies, positions
ignored, float32 angles or frequencies), a sign slip that is no rotation, and the general classes: no ValueError, x
changed in place, the dtype not kept."""

from submissions import Mutant

ROPE, T = "rope", ("test-rope",)
_ODD = "if d_head % 2:"
_SHAPE = "if positions.shape != (x.shape[-2],):"
_I = "i = torch.arange(d_head // 2, dtype=torch.float64, device=work)"
_POS = "angle = positions.to(work, torch.float64)[:, None]"
_FREQ = "base ** (-2 * i / d_head)"
_COS = "cos, sin = torch.cos(angle).to(x.device, x.dtype), torch.sin(angle).to(x.device, x.dtype)"
_PAIRS = "even, odd = x[..., 0::2], x[..., 1::2]"
_ROT = "even * cos - odd * sin, even * sin + odd * cos"
_RET = "return out.flatten(-2)"

MUTANTS = [
    Mutant("RoPE: split halves (rotate_half)", ROPE,
           ((_PAIRS, "even, odd = x[..., : d_head // 2], x[..., d_head // 2:]"),
            (_RET, "return torch.cat([out[..., 0], out[..., 1]], dim=-1)")), T,
           hint="Did you pair the first half of the features with the second"),
    Mutant("RoPE: turned the other way", ROPE, ((_ROT, "even * cos + odd * sin, -even * sin + odd * cos"),), T,
           hint="Did you turn the pairs the other way?"),
    Mutant("RoPE: one sign off (no rotation)", ROPE, ((_ROT, "even * cos + odd * sin, even * sin + odd * cos"),), T,
           hint="Is one of your signs off?"),
    Mutant("RoPE: frequencies base ** (-i / d)", ROPE, ((_FREQ, "base ** (-i / d_head)"),), T,
           hint="Did you use the frequencies base ** (-i / d_head)?"),
    Mutant("RoPE: positions 0 .. seq - 1", ROPE,
           ((_POS, "angle = torch.arange(x.shape[-2], dtype=torch.float64, device=work)[:, None]"),), T,
           hint="Did you use the positions 0 .. seq - 1 instead of the positions given?"),
    Mutant("RoPE: angles in float32", ROPE,
           ((_I, _I.replace("float64", "float32")), (_POS, _POS.replace("float64", "float32"))), T,
           hint="Did you compute the angles in float32?"),
    Mutant("RoPE: frequencies in float32, angles in float64", ROPE, ((_I, _I.replace("float64", "float32")),), T,
           hint="Did you compute the frequencies theta_i in float32"),
    # the general classes
    Mutant("RoPE: odd d_head accepted", ROPE, ((_ODD, "if False:"),), T, hint="expected ValueError to be raised"),
    Mutant("RoPE: positions' shape not checked, only their number", ROPE,
           ((_SHAPE, "if positions.numel() != x.shape[-2]:"),), T, hint="expected ValueError to be raised"),
    Mutant("RoPE: x rotated in place", ROPE, ((_RET, "return x.copy_(out.flatten(-2))"),), T,
           hint="changed its input"),
    Mutant("RoPE: float64 result (cos and sin not cast)", ROPE,
           ((_COS, "cos, sin = torch.cos(angle).to(x.device), torch.sin(angle).to(x.device)"),), T, hint="expected dtype float32"),
]
