"""The token sampler that runs inside an LLM program (et_copy.llm.pick_token):
Gumbel-max over hashed noise. It must sample softmax(logits / T) (a biased
hash would skew every sampled token with no error), keep to the top k, be
greedy at T = 0, and depend on the seed and the position only."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from et_copy.llm import gumbel_noise, pick_token  # noqa: E402

LOGITS = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, 1.5, -3.0, 0.25]])


def _picks(logits, temperature, top_k, seed, n, max_top_k=64):
    """The tokens picked at positions 0..n-1, as counts per token: one call,
    the positions batched (every op of pick_token broadcasts over them)."""
    picks = pick_token(logits.expand(n, -1), torch.tensor([temperature]), torch.tensor([top_k]),
                       torch.tensor([seed]), torch.arange(n), max_top_k)  # fmt: skip
    assert picks.shape == (n,)
    return torch.bincount(picks, minlength=logits.shape[-1]).double()


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
def test_sampled_frequencies_match_the_softmax_at_the_temperature(temperature):
    n = 20000
    counts = _picks(LOGITS, temperature, 0, seed=11, n=n)
    expected = torch.softmax(LOGITS[0].double() / temperature, -1) * n
    # Pearson's chi-square with 7 degrees of freedom: 24.3 is its 0.999 quantile.
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 24.3, (counts, expected)


def test_top_k_keeps_the_k_largest_and_samples_them_in_proportion():
    n = 20000
    counts = _picks(LOGITS, 1.0, 2, seed=5, n=n)  # the two largest: 2.0 (index 0) and 1.5 (index 5)
    assert counts.sum() == counts[0] + counts[5] == n
    share = float(counts[0] / n)
    expected = float(torch.softmax(torch.tensor([2.0, 1.5]), -1)[0])
    assert abs(share - expected) < 0.015, (share, expected)
    # k = 1 is greedy whatever the temperature.
    assert _picks(LOGITS, 5.0, 1, seed=5, n=50)[0] == 50


def test_temperature_zero_is_the_argmax_whatever_the_seed_and_top_k():
    for seed, top_k in [(0, 0), (7, 3), (2**62, 1)]:
        assert _picks(LOGITS, 0.0, top_k, seed, n=20)[0] == 20


def test_top_k_above_the_program_bound_is_clamped_to_it_and_never_reads_past_the_vocabulary():
    counts = _picks(LOGITS, 1.0, 1000, seed=3, n=300, max_top_k=3)  # three largest: indices 0, 5, 1
    assert counts[[0, 5, 1]].sum() == 300
    counts = _picks(LOGITS, 1.0, 1000, seed=3, n=300, max_top_k=1000)  # clamped to the vocabulary
    assert counts.sum() == 300 and (counts > 0).sum() >= 6


def test_the_noise_is_a_function_of_seed_and_position_only():
    a = gumbel_noise(torch.tensor([9]), torch.tensor([4]), 1000)
    assert torch.equal(a, gumbel_noise(torch.tensor([9]), torch.tensor([4]), 1000))
    for other in [gumbel_noise(torch.tensor([10]), torch.tensor([4]), 1000),
                  gumbel_noise(torch.tensor([9]), torch.tensor([5]), 1000)]:  # fmt: skip
        assert not torch.equal(a, other)
        assert abs(float(torch.corrcoef(torch.stack([a[0], other[0]]))[0, 1])) < 0.15


def test_the_noise_is_finite_and_gumbel_distributed_at_the_seeds_extremes():
    for seed in (0, 2**31 - 2, 2**31 - 1, 2**62, 2**63 - 1):
        g = gumbel_noise(torch.tensor([seed]), torch.tensor([2**40]), 50000)
        assert torch.isfinite(g).all(), seed
        # Gumbel(0, 1): mean is Euler's constant, variance pi^2 / 6.
        assert abs(float(g.mean()) - 0.5772) < 0.03, seed
        assert abs(float(g.var()) - 1.6449) < 0.08, seed


def test_the_host_pick_of_a_logits_program_equals_the_programs_own_pick():
    # A program that returns logits is sampled on the host (host_pick); one
    # that picks on the device runs pick_token: the same settings must give
    # the same token, whether the logits come as [vocab] or [1, vocab].
    from et_copy.llm._sampling import host_pick

    logits = torch.linspace(-1, 1, 32).reshape(1, 32)  # the largest last, an even vocabulary

    def device(seed, temperature, top_k, position):
        return int(pick_token(logits, torch.tensor([temperature]), torch.tensor([top_k]), torch.tensor([seed]),
                              torch.tensor([position]), 64)[0])  # fmt: skip

    for seed in range(6):
        for temperature, top_k in [(1.0, 0), (1.0, 3), (0.7, 1), (0.0, 0), (2.0, 31)]:
            for position in (0, 7):
                want = device(seed, temperature, top_k, position)
                for shape in [(32,), (1, 32)]:
                    got = host_pick(logits.reshape(shape), temperature, top_k, seed, position, 64)
                    assert type(got) is int and got == want, (seed, temperature, top_k, position, shape)
    # top_k None is the whole vocabulary, as 0 is; a top-k of 3 keeps to the 3 largest.
    whole = [host_pick(logits, 1.0, None, s, 7, 64) for s in range(8)]
    assert whole == [host_pick(logits, 1.0, 0, s, 7, 64) for s in range(8)] == [28, 30, 15, 31, 24, 24, 29, 6]
    assert {host_pick(logits, 1.0, 3, s, 7, 64) for s in range(8)} <= {29, 30, 31}
