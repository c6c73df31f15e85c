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
