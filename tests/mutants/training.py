from submissions import Mutant

# 10.1 shift_for_teacher_forcing
_CHECK_DIM = "if tgt.dim() != 2:"
_LENGTHS = "lengths = (tgt != pad).sum(dim=1)"
_COLUMN = "column = torch.full((batch, 1), pad, dtype=tgt.dtype, device=tgt.device)"
_EOS = "target[torch.arange(batch), lengths] = eos"
_RET_SHIFT = "return decoder_input, target"
# 10.2 cross_entropy
_LOG_P = "log_p = log_softmax(logits, dim=-1)"
_NO_PAD_MASS = "classes[pad] = False"
_MIX = "loss = (1.0 - label_smoothing) * nll + label_smoothing * uniform"
_COUNTED = "counted = targets != pad if pad is not None else torch.ones_like(targets, dtype=torch.bool)"
_MEAN = "return loss[counted].mean()"
_EPS_CHECK = "if not 0.0 <= label_smoothing <= 1.0:"
_IF_SMOOTH = "if label_smoothing > 0:"
# 10.3 lr_at
_WARM = "return max_lr * (step + 1) / warmup_steps"
_T = "    t = (step - warmup_steps) / (total_steps - warmup_steps)\n    return min_lr"
_CLAMP = "if step > total_steps:"
_COSINE = "return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * t)) / 2"
_LR_CHECK = "if step < 0 or warmup_steps < 0 or total_steps <= warmup_steps:"
_FLOOR = "return float(min_lr)"
# 10.4 train_step
_TRAIN = "model.train()\n"
_ZERO = "optimizer.zero_grad(set_to_none=True)"
_GRADS = "grads = [p.grad for p in model.parameters() if p.grad is not None]"
_IF_CLIP = "if norm > max_grad_norm:"
_SCALE = "g.mul_(max_grad_norm / (norm + 1e-6))"
_STEP_RET = "    optimizer.step()\n    return loss.item(), norm.item()"
_NORM = ("norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))\n"
         "    if norm > max_grad_norm:\n        for g in grads:\n            g.mul_(max_grad_norm / (norm + 1e-6))")
# 10.5 evaluate
_EVAL = "model.eval()"
_NO_GRAD = "with torch.no_grad():"
_RESTORE = "model.train(was_training)"
_ADD = "total += loss.item() * n"
_COUNT = "count += n"
_WAS = "was_training = model.training"
_EVAL_RET = "return total / count"
_IF_COUNTED = "if n:"
_ZERO_CHECK = "    if count == 0:\n        raise ValueError(\"evaluate needs at least one counted token\")\n"
# 10.6 mask_tokens
_SELECT = "selected = ordinary & (draw < p)"
_LABELS = "labels = torch.where(selected, tokens, torch.full_like(tokens, IGNORE))"
_CANDIDATES = "candidates = torch.tensor([i for i in range(vocab_size) if i not in special_set])"
_DRAW = "draw = torch.rand(tokens.shape, generator=generator)"
_MASK80 = "inputs[selected & (action < 0.8)] = mask_id"
_SWAP = "swap = selected & (action >= 0.8) & (action < 0.9)"
_CLONE = "inputs = tokens.clone()"
_P_CHECK = "if not 0.0 <= p <= 1.0:"
_MASK_RET = "return inputs, labels"

SHIFT, CE, LR, STEP, EVAL, MASK = ("teacher-forcing", "cross-entropy", "lr-schedule", "train-step", "evaluate",
                                   "mask-tokens")
T1, T2, T3, T4, T5, T6 = ((f"test-{c}",) for c in (SHIFT, CE, LR, STEP, EVAL, MASK))
_IN_PLACE = "changed its input"

MUTANTS = [
    # --- 10.1 teacher forcing
    Mutant("targets not shifted", SHIFT, ((_RET_SHIFT, "return decoder_input, decoder_input.clone()"),), T1,
           hint="Did you forget to shift?"),
    Mutant("eos in the last column", SHIFT, ((_EOS, "target[:, -1] = eos"),), T1,
           hint="Did you put <eos> in the last column?"),
    Mutant("eos left out", SHIFT, ((_EOS, "pass"),), T1, hint="Did you leave out <eos>?"),
    Mutant("padding id assumed to be 0", SHIFT, ((_LENGTHS, "lengths = (tgt != 0).sum(dim=1)"),), T1,
           hint="Did you assume the padding id is 0?"),
    Mutant("int64 whatever tgt's dtype", SHIFT, ((_COLUMN, _COLUMN.replace("tgt.dtype", "torch.long")),), T1,
           hint="expected dtype int32, got int64"),
    Mutant("3-d input accepted", SHIFT, ((_CHECK_DIM, "if False:"),), T1, hint="expected ValueError to be raised"),
    # --- 10.2 cross-entropy
    Mutant("padding counted in the loss", CE, ((_COUNTED, "counted = torch.ones_like(targets, dtype=torch.bool)"),),
           T2, hint="Did you count the padding?"),
    Mutant("smoothing mass spread over the padding token", CE, ((_NO_PAD_MASS, "pass"),), T2,
           hint="Did you spread the smoothing mass over the padding token too"),
    Mutant("smoothing without (1 - eps) on the true class", CE,
           ((_MIX, "loss = nll + label_smoothing * uniform"),), T2, hint="Did you forget the (1 - eps)"),
    Mutant("summed, not averaged", CE, ((_MEAN, "return loss[counted].sum()"),), T2,
           hint="Did you sum instead of averaging?"),
    Mutant("padding multiplied by 0 (NaN where its target is ruled out)", CE,
           ((_MEAN, "return (loss * counted).sum() / counted.sum()"),), T2,
           hint="Did you multiply the padding positions' losses by 0?"),
    Mutant("mean of the rows' means", CE,
           ((_MEAN, "return torch.stack([r[c].mean() for r, c in zip(loss.reshape(targets.shape[0], -1), "
                    "counted.reshape(targets.shape[0], -1))]).mean()"),), T2,
           hint="Did you average each row first, then the rows?"),
    Mutant("log(softmax(x)), unstable", CE, ((_LOG_P, "log_p = torch.log(torch.softmax(logits, dim=-1))"),), T2,
           hint="Did you take log(softmax(x))?"),
    Mutant("result cast to float32", CE, ((_MEAN, "return loss[counted].mean().float()"),), T2,
           hint="expected dtype float64, got float32"),
    Mutant("label_smoothing not checked", CE, ((_EPS_CHECK, "if False:"),), T2,
           hint="expected ValueError to be raised"),
    Mutant("smoothing term computed with label_smoothing 0 (NaN where a logit is -inf)", CE, ((_IF_SMOOTH, "if True:"),),
           T2, hint="Did you compute the smoothing term with label_smoothing 0 too?"),
    Mutant("pad defaults to 0 when left out", CE, (("pad: int | None = None,", "pad: int | None = 0,"),), T2,
           hint="Did you give pad a default of 0?"),
    Mutant("label_smoothing defaults to 0.1 when left out", CE,
           (("label_smoothing: float = 0.0) -> torch.Tensor:", "label_smoothing: float = 0.1) -> torch.Tensor:"),), T2,
           hint="Did you give label_smoothing a default other than 0.0?"),
    Mutant("logits shifted in place", CE,
           ((_LOG_P, "log_p = logits.sub_(logits.amax(dim=-1, keepdim=True)) - "
                     "logits.exp().sum(dim=-1, keepdim=True).log()"),), T2, hint=_IN_PLACE),
    Mutant("F.cross_entropy (not allowed)", CE,
           ((_MEAN, "return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), "
                    "targets.reshape(-1), ignore_index=-100 if pad is None else pad, "
                    "label_smoothing=label_smoothing)"),), T2, hint="is not allowed in this exercise"),
    # --- 10.3 the schedule
    Mutant("warm-up off by one step", LR, ((_WARM, "return max_lr * step / warmup_steps"),), T3,
           hint="Is your warm-up one step late?"),
    Mutant("warm-up divided by warmup_steps + 1", LR, ((_WARM, "return max_lr * (step + 1) / (warmup_steps + 1)"),),
           T3, hint="Did you divide by warmup_steps + 1?"),
    Mutant("decay measured from step 0", LR, ((_T, "    t = step / total_steps\n    return min_lr"),), T3,
           hint="Did you start the decay at step 0?"),
    Mutant("cosine not held after total_steps", LR, ((_CLAMP, "if False:"),), T3,
           hint="Did the cosine go on after total_steps?"),
    Mutant("decays to 0, min_lr ignored", LR,
           ((_COSINE, "return max_lr * (1 + math.cos(math.pi * t)) / 2"),), T3,
           hint="Did you decay to 0 instead of min_lr?"),
    Mutant("linear decay", LR, ((_COSINE, "return min_lr + (max_lr - min_lr) * (1 - t)"),), T3,
           hint="Did you decay linearly?"),
    Mutant("min_lr left out borrows a tenth of max_lr", LR,
           (("min_lr: float = 0.0) -> float:", "min_lr: float | None = None) -> float:"),
            (_LR_CHECK, "min_lr = max_lr / 10 if min_lr is None else min_lr\n    " + _LR_CHECK)), T3,
           hint="Did you default min_lr to a tenth of max_lr?"),
    Mutant("learning rate as a tensor", LR,
           ((_COSINE, "return torch.tensor(min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * t)) / 2)"),), T3,
           hint="expected the number"),
    Mutant("warmup_steps >= total_steps accepted", LR, ((_LR_CHECK, "if step < 0:"),), T3,
           hint="expected ValueError to be raised"),
    Mutant("min_lr returned as given (an int stays an int)", LR, ((_FLOOR, "return min_lr"),), T3,
           hint="Did you return min_lr as it was given after total_steps?"),
    # --- 10.4 the training step
    Mutant("clipping after the optimizer step", STEP,
           ((_GRADS, "optimizer.step()\n    " + _GRADS), (_STEP_RET, "    return loss.item(), norm.item()")), T4,
           hint="Did you clip after optimizer.step()?"),
    Mutant("old gradients not cleared", STEP, ((_ZERO, "pass"),), T4,
           hint="Did you forget to clear the old gradients?"),
    Mutant("gradients cleared after the step, not before", STEP,
           ((_ZERO, "pass"), (_STEP_RET, "    optimizer.step()\n    optimizer.zero_grad()\n    return loss.item(), norm.item()")),
           T4, hint="Did you clear the gradients after optimizer.step()?"),
    Mutant("each gradient clipped on its own", STEP,
           ((_SCALE, "g.mul_(min(1.0, max_grad_norm / (g.norm().item() + 1e-6)))"),), T4,
           hint="Did you clip each parameter's gradient on its own?"),
    Mutant("norm after clipping returned", STEP,
           ((_STEP_RET, "    optimizer.step()\n    return loss.item(), torch.linalg.vector_norm("
                        "torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()"),), T4,
           hint="Did you return the norm after clipping?"),
    Mutant("model.train() forgotten", STEP, ((_TRAIN, "pass\n"),), T4, hint="Did you forget model.train()?"),
    Mutant("gradients always rescaled to the threshold", STEP, ((_IF_CLIP, "if True:"),), T4,
           hint="Did you always rescale the gradients"),
    Mutant("clip_grad_norm_ (not allowed)", STEP,
           ((_NORM, "norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)"),), T4,
           hint="is not allowed in this exercise"),
    Mutant("tensors returned, not floats", STEP, ((_STEP_RET, "    optimizer.step()\n    return loss.detach(), norm"),),
           T4, hint="expected the number"),
    # --- 10.5 evaluation
    Mutant("evaluation left in training mode", EVAL, ((_EVAL, "pass"),), T5,
           hint="Did you leave the model in training mode?"),
    Mutant("evaluation with gradients on", EVAL, ((_NO_GRAD, "with torch.enable_grad():"),), T5,
           hint="Did you record gradients?"),
    Mutant("mode not restored", EVAL, ((_RESTORE, "pass"),), T5, hint="Did you leave the model in eval mode?"),
    Mutant("mode restored only when evaluation succeeds", EVAL,
           (("try:\n", "if True:\n"), ("    finally:\n        " + _RESTORE, "    " + _RESTORE)), T5,
           hint="Did you restore the mode only when evaluation succeeds?"),
    Mutant("no check for a count of zero", EVAL, ((_ZERO_CHECK, ""),), T5, hint="Did you divide by a count of zero?"),
    Mutant("a batch that counts no token read (its NaN loss)", EVAL, ((_IF_COUNTED, "if True:"),), T5,
           hint="got nan"),
    Mutant("ValueError at the first batch that counts no token", EVAL,
           ((_IF_COUNTED, "if not n:\n                    raise ValueError(\"a batch counts no token\")\n"
                          "                if n:"),), T5,
           hint="Did you raise ValueError at the first batch that counts no token?"),
    Mutant("ValueError raised before the mode is restored (no try/finally)", EVAL,
           (("try:\n", "if True:\n"),
            ("    finally:\n        " + _RESTORE + "\n" + _ZERO_CHECK, _ZERO_CHECK + "    " + _RESTORE + "\n")), T5,
           hint="Did you raise ValueError before restoring the model's mode?"),
    Mutant("mean of the batch means", EVAL, ((_ADD, "total += loss.item()"), (_COUNT, "count += 1")), T5,
           hint="Did you average the batch means?"),
    Mutant("evaluation loss as a tensor", EVAL, ((_EVAL_RET, "return torch.tensor(total / count)"),), T5,
           hint="expected the number"),
    Mutant("len() of the batches (a generator has none)", EVAL,
           ((_WAS, "if len(batches) == 0:\n        raise ValueError('no batches')\n    " + _WAS),), T5,
           hint="has no len()"),
    # --- 10.6 masked tokens
    Mutant("special tokens selected", MASK, ((_SELECT, "selected = draw < p"),), T6,
           hint="Did you select special tokens?"),
    Mutant("a label at every position", MASK, ((_LABELS, "labels = tokens.clone()"),), T6,
           hint="Did you give every position a label?"),
    Mutant("random replacement from the whole vocabulary", MASK, ((_CANDIDATES, "candidates = torch.arange(vocab_size)"),),
           T6, hint="Did you draw the random replacement from the whole vocabulary?"),
    Mutant("random replacement from the ids above the specials", MASK,
           ((_CANDIDATES, "candidates = torch.arange(len(special_set), vocab_size)"),), T6,
           hint="Did you assume the special ids are the lowest"),
    Mutant("global random generator", MASK, ((_DRAW, "draw = torch.rand(tokens.shape)"),), T6,
           hint="Did you use the global random generator?"),
    Mutant("a new unseeded generator when none is given", MASK,
           ((_P_CHECK, "generator = generator if generator is not None else torch.Generator()\n    " + _P_CHECK),), T6,
           hint="Did you make a new torch.Generator() when none is given?"),
    Mutant("p defaults to 0.1 when left out", MASK, (("p: float = 0.15,", "p: float = 0.1,"),), T6,
           hint="the share of ordinary positions selected is p"),
    Mutant("every selected token masked", MASK,
           ((_MASK80, "inputs[selected] = mask_id"), (_SWAP, "swap = selected & (action > 2)")), T6,
           hint="Did you replace every selected token by the mask?"),
    Mutant("random share drawn from what masking left (2%)", MASK,
           ((_SWAP, "swap = selected & (action >= 0.8) & (torch.rand(tokens.shape, generator=generator) < 0.1)"),),
           T6, hint="Did you give a random token to 10% of the positions left after masking?"),
    Mutant("labels taken after masking", MASK,
           ((_MASK_RET, "return inputs, torch.where(selected, inputs, torch.full_like(tokens, IGNORE))"),), T6,
           hint="Did you take the labels after masking?"),
    Mutant("tokens masked in place", MASK, ((_CLONE, "inputs = tokens"),), T6, hint=_IN_PLACE),
    Mutant("p not checked", MASK, ((_P_CHECK, "if False:"),), T6, hint="expected ValueError to be raised"),
    Mutant("labels as int32", MASK, ((_LABELS, _LABELS + ".int()"),), T6, hint="shapes and dtypes"),
]

# Readings of a contract that are right, though not the reference's: each must keep full marks.
ACCEPTED = [
    Mutant("gradients cleared through the model", STEP, ((_ZERO, "model.zero_grad()"),), T4),
    Mutant("gradients cleared to zero", STEP, ((_ZERO, "optimizer.zero_grad(set_to_none=False)"),), T4),
    Mutant("gradients cleared to zero through the model", STEP, ((_ZERO, "model.zero_grad(set_to_none=False)"),), T4),
    Mutant("gradients set to None by hand", STEP, ((_ZERO, "for p in model.parameters():\n        p.grad = None"),), T4),
    Mutant("graph switched off by inference_mode", EVAL, (("with torch.no_grad():", "with torch.inference_mode():"),), T5),
    Mutant("mode restored on an error by except and re-raise", EVAL,
           (("    finally:\n        " + _RESTORE,
             "    except BaseException:\n        " + _RESTORE + "\n        raise\n    " + _RESTORE),), T5),
]
