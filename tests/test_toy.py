"""course/toy.py: the reversal task and its tiny attention model (fast, CPU)."""

from __future__ import annotations

import torch

from course.toy import VOCAB, plot_attention, reversal_batch, train_reversal


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
