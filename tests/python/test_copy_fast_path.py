"""et_copy.h2d_copy/d2h_copy take a fast path (the bindings read torch
tensors and DeviceTensors themselves: python/bindings/copy_fast_path.cpp).
It must agree with the dict-spec path (_ops._run with _C.run_kernel) on
results, shapes and errors, including the layouts where the two derive
strides and dim orders by rule (size-0 and size-1 dims, permuted orders)."""

from __future__ import annotations

import itertools

import et_copy
import pytest
import torch
from et_copy import _C, _ops

SHAPES = [(), (0,), (3, 5), (2, 3, 1, 4), (2, 0, 3, 4), (5, 1, 0), (1, 1, 1, 1)]


def outcome(fn):
    try:
        result = fn()
    except Exception as e:  # noqa: BLE001 - compared between the paths
        return (type(e).__name__, str(e))
    return ("ok", tuple(result.shape))


def host(shape, order):
    t = torch.empty_permuted(shape, order) if shape else torch.empty(())
    t.copy_(torch.arange(t.numel(), dtype=torch.float32).reshape(shape))
    return t


@pytest.fixture(autouse=True)
def simulated_device():
    et_copy.use_simulated_device()


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_fast_path_agrees_with_the_dict_path_on_results_and_errors(shape, dynamic):
    orders = list(itertools.permutations(range(len(shape))))[:4]
    for self_order, out_order in itertools.product(orders, orders[:3]):
        x = host(shape, self_order)
        fast_dev = et_copy.empty(shape, torch.float32, dim_order=out_order, dynamic=dynamic)
        dict_dev = et_copy.empty(shape, torch.float32, dim_order=out_order, dynamic=dynamic)
        assert outcome(lambda: et_copy.h2d_copy(x, out=fast_dev)) == outcome(
            lambda: _ops._run(_C.run_kernel, _ops.H2D_COPY_OUT, x, dict_dev)
        )
        fast_host = host(shape, self_order).zero_()
        dict_host = fast_host.clone()
        assert outcome(lambda: et_copy.d2h_copy(fast_dev, out=fast_host, dynamic_out=dynamic)) == outcome(
            lambda: _ops._run(_C.run_kernel, _ops.D2H_COPY_OUT, fast_dev, dict_host, dynamic_out=dynamic)
        )
        assert torch.equal(fast_host, dict_host)
        assert fast_host.stride() == dict_host.stride()


def test_fast_path_resizes_a_dynamic_out_like_the_dict_path():
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    fast_dev = et_copy.empty((4, 3), torch.float32, dynamic=True)
    dict_dev = et_copy.empty((4, 3), torch.float32, dynamic=True)
    et_copy.h2d_copy(x, out=fast_dev)
    _ops._run(_C.run_kernel, _ops.H2D_COPY_OUT, x, dict_dev)
    assert fast_dev.shape == dict_dev.shape == (2, 3)
    fast_out = torch.zeros(4, 3)
    dict_out = torch.zeros(4, 3)
    et_copy.d2h_copy(fast_dev, out=fast_out, dynamic_out=True)
    _ops._run(_C.run_kernel, _ops.D2H_COPY_OUT, dict_dev, dict_out, dynamic_out=True)
    assert fast_out.shape == dict_out.shape == (2, 3)
    assert fast_out.stride() == dict_out.stride()
    assert torch.equal(fast_out, x) and torch.equal(dict_out, x)


def test_fast_path_hands_a_freed_device_tensor_to_the_python_checks():
    dev = et_copy.empty((4,), torch.float32)
    dev.free()
    with pytest.raises(ValueError, match="out is a DeviceTensor whose memory was freed"):
        et_copy.h2d_copy(torch.zeros(4), out=dev)
    assert _C.run_kernel_objects(True, torch.zeros(4), dev, False) is NotImplemented


def test_fast_path_hands_an_unsupported_dtype_to_the_python_checks():
    dev = et_copy.empty((4,), torch.float32)
    odd = torch.zeros(4, dtype=torch.uint8).view(torch.qint8)
    assert _C.run_kernel_objects(True, odd, dev, False) is NotImplemented
    with pytest.raises(TypeError, match="self has dtype torch.qint8"):
        et_copy.h2d_copy(odd, out=dev)
