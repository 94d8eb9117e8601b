"""course/reversal.py: the reversal task and its tiny attention model (fast, CPU)."""

from __future__ import annotations

import torch

from course.reversal import (
    LM_VOCAB,
    VOCAB,
    ToyLM,
    plot_attention,
    reversal_batch,
    reversal_lm_batch,
    train_reversal,
    train_toy_lm,
)


def test_vocab_round_trip_and_specials():
    assert VOCAB.tokens[:3] == ["<pad>", "<bos>", "<eos>"] and VOCAB.size == 13
    assert VOCAB.decode(VOCAB.encode("3141")) == "3141"
    assert VOCAB.decode([VOCAB.bos, *VOCAB.encode("7"), VOCAB.eos], keep_specials=True) == "<bos>7<eos>"


def test_batch_is_reversed_padded_and_seeded():
    batch = reversal_batch(16, 7, min_length=2, generator=torch.Generator().manual_seed(3))
    again = reversal_batch(16, 7, min_length=2, generator=torch.Generator().manual_seed(3))
    assert torch.equal(batch.src, again.src) and batch.src.shape == batch.tgt.shape == (16, 7)
    assert batch.src.dtype == batch.tgt.dtype == torch.int64
    for src, tgt, n in zip(batch.src, batch.tgt, batch.lengths.tolist()):
        assert torch.equal(tgt[:n], src[:n].flip(0))
        assert (src[n:] == VOCAB.pad).all() and (tgt[n:] == VOCAB.pad).all()
        assert (src[:n] >= VOCAB.first_symbol).all()
    assert batch.padding_mask().shape == (16, 1, 7)
    assert batch.decoder_input()[:, 0].eq(VOCAB.bos).all()
    target = batch.decoder_target()
    assert target[torch.arange(16), batch.lengths].eq(VOCAB.eos).all()


def test_trained_model_learns_the_anti_diagonal():
    toy = train_reversal(seed=0, steps=150)
    assert toy.accuracy > 0.99 and toy.seconds < 10
    example = "31415926"
    weights = toy.attention_maps(example)
    n = len(example)
    assert weights.shape == (n, n)
    assert torch.allclose(weights.sum(dim=-1), torch.ones(n), atol=1e-5)
    assert weights.argmax(dim=-1).tolist() == list(range(n - 1, -1, -1))
    assert toy.predict(example) == example[::-1]
    plot_attention(weights, list(example), list(toy.predict(example)))


def test_same_seed_same_run_and_custom_attention():
    a, b = train_reversal(seed=1, steps=20), train_reversal(seed=1, steps=20)
    assert a.losses == b.losses
    assert train_reversal(seed=2, steps=20).losses != a.losses
    heads = train_reversal(num_heads=2, steps=20)
    assert heads.attention_maps("123").shape == (2, 3, 3)

    class Plain(torch.nn.Module):  # any module called as attention(x, mask=...) -> (out, weights)
        def __init__(self, d):
            super().__init__()
            self.proj = torch.nn.Linear(d, 5)

        def forward(self, x, mask=None):
            n = x.shape[1]
            return self.proj(x), torch.full((x.shape[0], n, n), 1 / n)

    plain = train_reversal(lambda d: Plain(d), steps=5)
    assert plain.attention_maps("1234").shape == (4, 4)


def test_lm_batch_layout_and_counted_positions():
    ids, counted = reversal_lm_batch(8, 5, min_length=2, generator=torch.Generator().manual_seed(4))
    again, _ = reversal_lm_batch(8, 5, min_length=2, generator=torch.Generator().manual_seed(4))
    assert torch.equal(ids, again) and ids.shape == counted.shape == (8, 13) and ids.dtype == torch.int64
    for row, mask in zip(ids.tolist(), counted):
        n = row.index(LM_VOCAB.sep) - 1
        digits, rest = row[1:n + 1], row[n + 2:]
        assert row[0] == LM_VOCAB.bos and rest[:n] == digits[::-1] and rest[n] == LM_VOCAB.eos
        assert all(t == LM_VOCAB.pad for t in rest[n + 1:])
        assert mask.nonzero().flatten().tolist() == list(range(n + 1, 2 * n + 2))  # from <sep> to the last digit
    assert LM_VOCAB.sep == 3 and VOCAB.size == 13 and LM_VOCAB.size == 14


def test_toy_lm_is_causal_and_learns_to_reverse():
    model = ToyLM()
    ids = torch.randint(0, LM_VOCAB.size, (2, 9))
    changed = ids.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % LM_VOCAB.size
    with torch.no_grad():  # a future token never changes an earlier position's logits
        assert torch.allclose(model(ids)[:, :6], model(changed)[:, :6], atol=1e-5)
    assert model.next_token_logits(ids).shape == (2, LM_VOCAB.size)
    lm = train_toy_lm(seed=0)
    assert lm.accuracy > 0.99 and lm.seconds < 15
    seq = lm.prompt("31415")
    for _ in range(6):
        seq = torch.cat([seq, lm.next_token_logits(seq).argmax(-1, keepdim=True)], dim=1)
    assert LM_VOCAB.decode(seq[0, 7:], keep_specials=True) == "51413<eos>"
    assert train_toy_lm(seed=1, steps=5).losses == train_toy_lm(seed=1, steps=5).losses
