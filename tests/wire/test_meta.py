"""The one way a worker's checks run an op before it runs: on meta tensors, every device meta."""
import torch

from syft_lab.wire.meta import run_on_meta, to_meta
from syft_lab.workers.limits import OutputEstimator

aten = torch.ops.aten


def broadcast(n, dtype=torch.float16):
    return torch.ones(1, dtype=dtype).expand(n)


def test_an_op_that_implies_the_cpu_stays_on_meta():
    # _to_cpu copies each tensor to the CPU inside its decomposition (_to_copy(device=cpu)): on a
    # meta copy of a 2**31-element broadcast view the check itself made a 4 GiB CPU tensor, and a
    # worker in a memory cgroup was killed (the seed-45 fuzz)
    (out,) = run_on_meta(aten._to_cpu.default, [to_meta([broadcast(2**31 + 1)])])
    assert out.device.type == "meta" and out.shape == (2**31 + 1,)


def test_every_device_argument_is_meta_given_defaulted_or_positional():
    x = to_meta(torch.ones(2, 3))
    assert run_on_meta(aten.zeros.default, [[3, 4]], {"device": torch.device("cpu")}).is_meta
    assert run_on_meta(aten.zeros.default, [[3, 4]]).is_meta  # no device: torch's default, the CPU
    assert run_on_meta(aten.to.device, [x, torch.device("cpu"), torch.float64]).is_meta
    assert run_on_meta(aten._to_copy.default, [x], {"device": torch.device("cpu")}).dtype == torch.float32


def test_the_output_estimate_of_a_copy_to_the_cpu_counts_what_it_makes():
    est = OutputEstimator().estimate(aten._to_cpu.default, [[broadcast(2**20)]], None)
    assert (est.new_bytes, est.outputs) == (2 * 2**20, 1)  # a contiguous copy's size, not "unknown"
