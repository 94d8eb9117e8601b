"""11.4 AdamW and 11.5 decay_groups: the syllabus's mistakes (L2 decay in the gradient, bias correction a
step off, decay on the no-decay group; nanoGPT's rule, biases decayed, the tied weight twice, norms decayed),
the usual slips, and the general classes: no ValueError, a forbidden call, another order."""

from submissions import Mutant

ADAMW, TA = "adamw", ("test-adamw",)
_CHECK = "if lr < 0 or eps < 0 or weight_decay < 0 or not all(0.0 <= b < 1.0 for b in betas):"
_LOOP = "for group in self.param_groups:"
_READ = 'group["weight_decay"]'
_SKIP = "if p.grad is None:\n                    continue"
_COUNT = 't, m, v, g = state["step"], state["m"], state["v"], p.grad'
_DECAY = "p.mul_(1 - lr * decay)"
_HAT = "m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)"
_STEP = "p.sub_(lr * m_hat / (v_hat.sqrt() + eps))"

GROUPS, TG = "decay-groups", ("test-decay-groups",)
_LINEAR = "linear = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)} - embeddings"
_PARAMS = "params = list(model.parameters())"
_DECAYED = '[p for p in params if id(p) in linear]'
_REST = '[p for p in params if id(p) not in linear]'

MUTANTS = [
    # --- 11.4 AdamW
    Mutant("AdamW: L2 decay in the gradient (Adam with weight_decay)", ADAMW, ((_DECAY, "g = g + decay * p"),), TA,
           hint="Did you add weight_decay * p to the gradient?"),
    Mutant("AdamW: bias correction a step late", ADAMW,
           ((_HAT, "m_hat, v_hat = m / (1 - beta1 ** (t + 1)), v / (1 - beta2 ** (t + 1))"),), TA,
           hint="Is your bias correction a step off?"),
    Mutant("AdamW: no bias correction", ADAMW, ((_HAT, "m_hat, v_hat = m, v"),), TA,
           hint="Did you leave out the bias correction?"),
    Mutant("AdamW: every group decayed with the defaults' weight_decay", ADAMW,
           ((_READ, 'self.defaults["weight_decay"]'),), TA,
           hint="Did you decay every group with the constructor's weight_decay?"),
    Mutant("AdamW: decay after the update", ADAMW, ((_DECAY, "pass"), (_STEP, _STEP + "\n                " + _DECAY)),
           TA, hint="Did you decay after the Adam step?"),
    Mutant("AdamW: decay without lr", ADAMW, ((_DECAY, "p.mul_(1 - decay)"),), TA,
           hint="Did you forget lr in the decay?"),
    Mutant("AdamW: eps inside the root", ADAMW, ((_STEP, "p.sub_(lr * m_hat / (v_hat + eps).sqrt())"),), TA,
           hint="Did you put eps inside the square root?"),
    Mutant("AdamW: a missing gradient taken as zeros", ADAMW,
           ((_SKIP, "if p.grad is None:\n                    p.grad = torch.zeros_like(p)"),), TA,
           hint="Did you take a missing gradient as zeros?"),
    Mutant("AdamW: one step count for the optimizer", ADAMW,
           ((_LOOP, 'self.calls = getattr(self, "calls", 0) + 1\n        ' + _LOOP),
            (_COUNT, _COUNT.replace('state["step"], state["m"]', 'self.calls, state["m"]'))), TA,
           hint="Did you count steps per optimizer instead of per parameter?"),
    Mutant("AdamW: each group's lr read at its first step only", ADAMW,
           (('lr, (beta1, beta2), eps, decay = group["lr"],', 'lr, (beta1, beta2), eps, decay = group.setdefault("first lr", group["lr"]),'),), TA,
           hint="Did you read the learning rate once?"),
    Mutant("AdamW: moments kept in a dict of its own, not self.state", ADAMW,
           (("state = self.state[p]", 'state = self.__dict__.setdefault("moments", {}).setdefault(p, {})'),), TA,
           hint="Did you keep m, v and the step count outside self.state?"),
    # the general classes
    Mutant("AdamW: only a negative lr refused", ADAMW, ((_CHECK, "if lr < 0:"),), TA,
           hint="expected ValueError to be raised"),
    Mutant("AdamW: beta = 0 refused", ADAMW, ((_CHECK, _CHECK.replace("0.0 <= b", "0.0 < b")),), TA,
           hint="0 itself is allowed"),
    Mutant("AdamW: torch.optim.AdamW inside", ADAMW,
           ((_LOOP, 'self.__dict__.setdefault("inner", torch.optim.AdamW(self.param_groups)).step()\n'
                    '        for group in []:'),), TA, hint="is not allowed in this exercise"),
    # --- 11.5 decay_groups
    Mutant("decay_groups: nanoGPT's rule (two or more dimensions)", GROUPS,
           ((_DECAYED, "[p for p in params if p.dim() >= 2]"), (_REST, "[p for p in params if p.dim() < 2]")), TG,
           hint="nanoGPT's rule"),
    Mutant("decay_groups: the linear layers' biases decayed", GROUPS,
           ((_LINEAR, "linear = {id(q) for m in model.modules() if isinstance(m, nn.Linear) for q in "
                      "m.parameters()} - embeddings"),), TG, hint="Did you decay the linear layers' biases?"),
    Mutant("decay_groups: the tied weight decayed", GROUPS, ((_LINEAR, _LINEAR.removesuffix(" - embeddings")),), TG,
           hint="Did you decay the output layer's weight although the embedding shares it?"),
    Mutant("decay_groups: the tied weight in both groups", GROUPS,
           ((_LINEAR, _LINEAR.removesuffix(" - embeddings")),
            (_REST, "[p for p in params if id(p) not in linear or id(p) in embeddings]")), TG,
           hint="Is the tied weight in both groups?"),
    Mutant("decay_groups: everything but the biases decayed (norms too)", GROUPS,
           ((_DECAYED, '[p for n, p in model.named_parameters() if not n.endswith("bias")]'),
            (_REST, '[p for n, p in model.named_parameters() if n.endswith("bias")]')), TG,
           hint="Did you decay everything but the biases?"),
    Mutant("decay_groups: the no-decay group frozen", GROUPS,
           (("params = list(model.parameters())",
             "params = list(model.parameters())\n    for p in params:\n        p.requires_grad_(id(p) in linear)"),), TG,
           hint="Did you change the model (requires_grad switched off)?"),
    Mutant("decay_groups: parameters in reverse order", GROUPS, ((_PARAMS, _PARAMS + "[::-1]"),), TG,
           hint="model.parameters() order"),
    Mutant("decay_groups: both groups decayed", GROUPS, (('linear], "weight_decay": 0.0}', 'linear], "weight_decay": weight_decay}'),),
           TG, hint="'weight_decay': 0.0}"),
]
