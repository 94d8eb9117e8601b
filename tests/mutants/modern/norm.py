"""11.1 RMSNorm: the syllabus's mistakes (the wrong axis, layer norm's centring, eps outside the root) and
the usual slips (no gain, eps's default or argument, no upcast of float16 or of bfloat16, a bias), with the general
classes: no ValueError, x changed in place, the dtype not cast back, a forbidden call."""

from submissions import Mutant

NORM, T = "rmsnorm", ("test-rmsnorm",)
_INIT = "def __init__(self, d_model: int, eps: float = 1e-5) -> None:"
_EPS = "self.eps = eps"
_GAIN = "self.weight = nn.Parameter(torch.ones(d_model))"
_CHECK = "if x.shape[-1] != self.weight.shape[0]:"
_UP = "h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x"
_MS = "h.pow(2).mean(dim=-1, keepdim=True)"
_RMS = "rms = torch.sqrt(h.pow(2).mean(dim=-1, keepdim=True) + self.eps)"
_RET = "return (h / rms * self.weight.to(h.dtype)).to(x.dtype)"

MUTANTS = [
    Mutant("RMSNorm: mean square over the first axis", NORM, ((_MS, "h.pow(2).mean(dim=0, keepdim=True)"),), T,
           hint="Did you take the mean over the wrong axis?"),
    Mutant("RMSNorm: the mean subtracted (layer norm)", NORM,
           ((_RMS, "h = h - h.mean(dim=-1, keepdim=True)\n        " + _RMS),), T, hint="Did you subtract the mean?"),
    Mutant("RMSNorm: eps outside the root", NORM,
           ((_RMS, "rms = torch.sqrt(h.pow(2).mean(dim=-1, keepdim=True)) + self.eps"),), T,
           hint="Did you put eps outside the square root?"),
    Mutant("RMSNorm: no gain", NORM, ((_RET, "return (h / rms).to(x.dtype)"),), T, hint="Did you forget the gain?"),
    Mutant("RMSNorm: eps defaults to 1e-6", NORM, ((_INIT, _INIT.replace("1e-5", "1e-6")),), T,
           hint="Did you change eps's default?"),
    Mutant("RMSNorm: eps argument ignored", NORM, ((_EPS, "self.eps = 1e-5"),), T,
           hint="Did you ignore the eps argument?"),
    Mutant("RMSNorm: float16 computed in float16", NORM, ((_UP, "h = x"),), T,
           hint="Did you compute in half precision?"),
    Mutant("RMSNorm: every dtype computed in float32", NORM, ((_UP, "h = x.float()"),), T,
           hint="Did you compute a float64 input in float32?"),
    Mutant("RMSNorm: a bias", NORM, ((_GAIN, _GAIN + "\n        self.bias = nn.Parameter(torch.zeros(d_model))"),),
           T, hint="Did you give RMSNorm a bias?"),
    Mutant("RMSNorm: the gain starts at zeros", NORM, ((_GAIN, "self.weight = nn.Parameter(torch.zeros(d_model))"),),
           T, hint="Did you start the gain at zeros?"),
    # the general classes
    Mutant("RMSNorm: no ValueError for the wrong size", NORM, ((_CHECK, "if False:"),), T,
           hint="expected ValueError to be raised"),
    Mutant("RMSNorm: x rescaled in place", NORM, ((_RET, "return h.div_(rms).mul_(self.weight.to(h.dtype)).to(x.dtype)"),),
           T, hint="changed its input"),
    Mutant("RMSNorm: half precision not cast back", NORM, ((_RET, "return h / rms * self.weight.to(h.dtype)"),), T,
           hint="cast back"),
    Mutant("RMSNorm: F.rms_norm", NORM,
           ((_RET, "return torch.nn.functional.rms_norm(h, (h.shape[-1],), self.weight.to(h.dtype), self.eps)"
                   ".to(x.dtype)"),), T, hint="is not allowed in this exercise"),
]
