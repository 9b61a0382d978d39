"""Device parsing, the accelerator check and the per-rank split of inference inputs."""

import pytest

from goatdna.errors import GoatDNAError
from goatdna.runtime import Runtime, parse_devices, rank_block


def test_parse_devices_accepts_counts_lists_and_auto() -> None:
    assert parse_devices("auto") == "auto"
    assert parse_devices("2") == 2
    assert parse_devices(-1) == -1
    assert parse_devices("0,1") == [0, 1]


@pytest.mark.parametrize("bad", ["abc", "0", "-2", "1,x", ","])
def test_parse_devices_rejects_with_the_option_name(bad: str) -> None:
    with pytest.raises(GoatDNAError, match="--devices"):
        parse_devices(bad)


def test_gpu_without_cuda_is_a_user_error() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    with pytest.raises(GoatDNAError, match="no CUDA GPU"):
        Runtime.from_options(accelerator="gpu")
    with pytest.raises(GoatDNAError, match="--accelerator"):
        Runtime.from_options(accelerator="tpu-v9")
    with pytest.raises(GoatDNAError, match="--num-nodes"):
        Runtime.from_options(num_nodes=0)


@pytest.mark.parametrize("n_items", [0, 1, 5, 7, 64])
@pytest.mark.parametrize("world", [1, 2, 3, 8])
def test_rank_blocks_tile_the_inputs_in_order(n_items: int, world: int) -> None:
    blocks = [rank_block(n_items, r, world) for r in range(world)]
    assert [i for block in blocks for i in block] == list(range(n_items))
    sizes = [len(b) for b in blocks]
    assert max(sizes) - min(sizes) <= 1
    with pytest.raises(ValueError):
        rank_block(n_items, world, world)
