"""Reference solutions of chapter 10_training.

Generated from solutions/10_training/10_training.ipynb (cells tagged 'export') by
`python -m autograder release`. Do not edit: edit the solution notebook.
"""
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from course.reference.decoding import log_softmax


def shift_for_teacher_forcing(tgt: torch.Tensor, bos: int, eos: int,
                              pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Decoder inputs and targets for teacher forcing.

    tgt: (batch, n) integer ids, each row's tokens y_1 .. y_L followed by `pad` up to n (L may be n).
    Returns (decoder_input, target), both (batch, n + 1) with tgt's dtype:
        decoder_input[b] = <bos> y_1 .. y_L  pad .. pad
        target[b]        = y_1 .. y_L <eos>  pad .. pad
    so that target[:, i] is the token that follows decoder_input[:, :i + 1].
    """
    if tgt.dim() != 2:
        raise ValueError(f"tgt must have shape (batch, n), got {tuple(tgt.shape)}")
    batch = tgt.shape[0]
    lengths = (tgt != pad).sum(dim=1)                     # (batch,) real tokens per row
    column = torch.full((batch, 1), pad, dtype=tgt.dtype, device=tgt.device)
    decoder_input = torch.cat([torch.full_like(column, bos), tgt], dim=1)
    target = torch.cat([tgt, column], dim=1)             # a new tensor: tgt is left alone
    target[torch.arange(batch), lengths] = eos            # <eos> right after each row's last token
    return decoder_input, target


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor, pad: int | None = None,
                  label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over the positions whose target is not `pad`, with label smoothing.

    logits: (..., V) float; targets: (...) int64 ids in [0, V). With eps = label_smoothing, each
    counted position's target distribution is q = (1 - eps) * one_hot(target) + eps * u, where u is
    uniform over the classes other than `pad` (over all V classes when pad is None), and its loss
    is -sum_c q_c * log softmax(logits)_c. Returns a 0-dim tensor of logits' dtype.
    """
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} do not match")
    log_p = log_softmax(logits, dim=-1)                                   # (..., V)
    nll = -log_p.gather(-1, targets.unsqueeze(-1)).squeeze(-1)            # (...)
    if label_smoothing > 0:   # only then: a -inf logit (a class ruled out) would give 0 * inf = NaN
        classes = torch.ones(logits.shape[-1], dtype=torch.bool, device=logits.device)
        if pad is not None:
            classes[pad] = False                                          # no smoothing mass on <pad>
        uniform = -log_p[..., classes].mean(dim=-1)                       # (...)
        loss = (1.0 - label_smoothing) * nll + label_smoothing * uniform
    else:
        loss = nll
    counted = targets != pad if pad is not None else torch.ones_like(targets, dtype=torch.bool)
    return loss[counted].mean()


def lr_at(step: int, max_lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0) -> float:
    """The learning rate of optimizer step `step` (0, 1, 2, ...): linear warm-up, then cosine decay.

        step <  warmup_steps:              max_lr * (step + 1) / warmup_steps
        warmup_steps <= step <= total_steps: min_lr + (max_lr - min_lr) * (1 + cos(pi * t)) / 2,
                                           t = (step - warmup_steps) / (total_steps - warmup_steps)
        step >  total_steps:               min_lr
    """
    if step < 0 or warmup_steps < 0 or total_steps <= warmup_steps:
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        raise ValueError(f"warmup_steps ({warmup_steps}) must be less than total_steps ({total_steps}): "
                         "a shorter run needs a shorter warm-up too")
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step > total_steps:
        return float(min_lr)                   # a float even when min_lr is given as an int
    t = (step - warmup_steps) / (total_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * t)) / 2


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer,
               loss_fn: Callable[[nn.Module, Any], torch.Tensor], batch: Any,
               max_grad_norm: float) -> tuple[float, float]:
    """One optimisation step with gradient clipping by the global norm.

    Puts the model in training mode, clears old gradients, computes loss_fn(model, batch) (a 0-dim
    tensor), back-propagates, clips (if the L2 norm of all gradients together exceeds max_grad_norm,
    multiply every gradient by max_grad_norm / (norm + 1e-6)), then takes the optimizer step.
    Returns (the loss, the gradient norm before clipping) as Python floats.
    """
    if max_grad_norm <= 0:
        raise ValueError(f"max_grad_norm must be positive, got {max_grad_norm}")
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model, batch)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    if norm > max_grad_norm:
        for g in grads:
            g.mul_(max_grad_norm / (norm + 1e-6))
    optimizer.step()
    return loss.item(), norm.item()


def evaluate(model: nn.Module, batches: Iterable[Any],
             loss_fn: Callable[[nn.Module, Any], tuple[torch.Tensor, int]]) -> float:
    """The mean loss per counted token over held-out `batches`.

    loss_fn(model, batch) -> (mean loss over the batch's counted tokens, how many it counted).
    Runs in eval mode without building a graph, iterates `batches` once, leaves the model in the
    mode it was in. Returns sum(mean_b * count_b) / sum(count_b) as a float.
    """
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        with torch.no_grad():
            for batch in batches:
                loss, n = loss_fn(model, batch)
                if n:                     # a batch that counts no token adds nothing (its mean may be NaN)
                    total += loss.item() * n
                    count += n
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("evaluate needs at least one counted token")
    return total / count


IGNORE = -100   # the label of a position the loss skips (F.cross_entropy's default ignore_index)


def mask_tokens(tokens: torch.Tensor, mask_id: int, vocab_size: int, special_ids: Iterable[int],
                p: float = 0.15, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masked-token inputs and labels.

    tokens: (batch, n) int64. Each position whose token is not special is selected independently
    with probability p. Returns (inputs, labels), both (batch, n) int64:
        labels: the original token at selected positions, IGNORE (-100) elsewhere;
        inputs: at a selected position mask_id with probability 0.8, a random token (uniform over
                the ids in [0, vocab_size) that are not special) with probability 0.1, the original
                token with probability 0.1; the original token everywhere else.
    All randomness comes from `generator`.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    special_set = {int(i) for i in special_ids}                       # built once, not per position
    special = torch.tensor(sorted(special_set), dtype=tokens.dtype)
    ordinary = ~torch.isin(tokens, special)
    draw = torch.rand(tokens.shape, generator=generator)
    selected = ordinary & (draw < p)
    labels = torch.where(selected, tokens, torch.full_like(tokens, IGNORE))
    action = torch.rand(tokens.shape, generator=generator)              # 80 / 10 / 10
    candidates = torch.tensor([i for i in range(vocab_size) if i not in special_set])
    random_tokens = candidates[torch.randint(len(candidates), tokens.shape, generator=generator)]
    inputs = tokens.clone()
    inputs[selected & (action < 0.8)] = mask_id
    swap = selected & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_tokens[swap].to(tokens.dtype)
    return inputs, labels
