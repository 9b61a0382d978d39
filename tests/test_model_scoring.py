"""The scoring primitive against a float64 brute force: log-softmax at each next base."""

import torch

from goatdna.model import DNADecoder, ModelConfig, next_token_loss, sequence_log_probs
from goatdna.model.scoring import IGNORE_TARGET, target_log_probs


def _tiny(positional: str) -> DNADecoder:
    torch.manual_seed(0)
    config = ModelConfig(
        positional=positional, n_layers=2, d_model=32, n_heads=2, goat_modes=3, train_length=64
    )
    return DNADecoder(config).eval()


def test_sequence_log_probs_equal_float64_brute_force() -> None:
    for positional in ("goat", "rope"):
        model = _tiny(positional)
        tokens = torch.randint(0, 5, (3, 40))
        got = sequence_log_probs(model, tokens, start_pos=7)  # (3, 39)
        assert got.shape == (3, 39) and got.dtype == torch.float32
        with torch.no_grad():
            logits = model(tokens[:, :-1], 7).double()
        for b in range(3):
            for t in range(1, 40):
                target = int(tokens[b, t])
                if target == IGNORE_TARGET:
                    assert got[b, t - 1] == 0.0
                    continue
                expected = logits[b, t - 1, target] - torch.logsumexp(logits[b, t - 1], dim=0)
                assert abs(float(got[b, t - 1]) - float(expected)) < 1e-5


def test_loss_is_the_negative_mean_over_counted_targets() -> None:
    logits = torch.randn(2, 9, 5)
    targets = torch.tensor([[0, 1, 2, 3, 4, 4, 0, 1, 2], [4] * 9])
    logp = target_log_probs(logits, targets)
    counted = targets != IGNORE_TARGET
    assert torch.equal(logp[~counted], torch.zeros(int((~counted).sum())))
    mean = next_token_loss(logits, targets)
    assert torch.allclose(mean, -logp.sum() / counted.sum())
    assert torch.allclose(next_token_loss(logits, targets, reduction="none"), -logp)
    assert next_token_loss(logits[1:], targets[1:]) == 0.0  # nothing counted
