"""Errors that teach (issue 20 item 7): a torch name tracegrad lacks raises an AttributeError subclass naming it
and the nearest tracegrad spelling, in nn.torch, nn, nn.functional, the submodules and on Tensor; a typo gets
close matches; hasattr, NumPy's protocols, copy and pickle still see plain "no such attribute"."""
import copy
import pickle

import numpy as np
import pytest

import nn
import nn.torch as torch
import tracer
from nn import functional as F
from tracer.torch_hints import MissingTorchAttribute


@pytest.mark.parametrize("owner, name, says", [
    (torch, "fft", "numpy.fft"),
    (torch, "vmap", "autodiff"),
    (torch, "sparse_coo_tensor", "dense"),
    (torch, "hub", "load_state_dict"),
    (torch, "i0", "torch.i0 is not supported by tracegrad"),
    (torch, "view_as_complex", "complex"),
    (torch.autograd, "Function".lower() + "al", "autodiff.grad"),
    (torch.cuda, "Stream", "CuPy"),
    (nn, "LazyLinear", "nn.Linear"),
    (nn, "SyncBatchNorm", "nn.BatchNorm2d"),
    (F, "grid_sample", "torch.nn.functional.grid_sample"),
    (F, "gumbel_softmax", "F.softmax"),
])
def test_a_missing_torch_name_names_itself_and_the_nearest_spelling(owner, name, says):
    with pytest.raises(AttributeError) as info:
        getattr(owner, name)
    assert isinstance(info.value, MissingTorchAttribute)
    assert name in str(info.value) and says in str(info.value)
    assert not hasattr(owner, name)


@pytest.mark.parametrize("owner, name, close", [
    (torch, "zeross", "zeros"), (torch, "tensr", "tensor"), (nn, "Lineer", "Linear"), (F, "rellu", "relu"),
    (torch.linalg, "vector_nrm", "vector_norm"),
])
def test_a_typo_gets_pythons_message_with_close_matches(owner, name, close):
    with pytest.raises(AttributeError, match=f"has no attribute '{name}'.*{close}"):
        getattr(owner, name)


@pytest.mark.parametrize("name, says", [
    ("register_hook", "retain_grad"), ("storage", "x.numpy()"), ("put_", "x.view(-1)[index] = source"),
    ("data_ptr", "ctypes"), ("cfloat", "complex"), ("index_reduce_", "index_add_"),
])
def test_a_missing_tensor_method_names_itself_and_the_nearest_spelling(name, says):
    x = tracer.ones(2)
    with pytest.raises(MissingTorchAttribute) as info:
        getattr(x, name)
    assert f"torch.Tensor.{name}" in str(info.value) and says in str(info.value)
    assert not hasattr(x, name)


def test_a_tensor_typo_gets_close_matches():
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'unsqeeze'; did you mean 'unsqueeze'"):
        tracer.ones(2).unsqeeze(0)


def test_numpy_interop_copy_and_pickle_still_see_plain_attribute_errors():
    x = tracer.tensor([1.0, 2.0])
    assert not hasattr(x, "__array_interface__") and not hasattr(x, "__cuda_array_interface__")
    assert not hasattr(x, "items") and not hasattr(x, "keys")  # pytree and dict duck typing
    with pytest.raises(AttributeError) as info:
        x.__array_struct__  # noqa: B018
    assert type(info.value) is AttributeError  # dunder probes: the plain error, no lookup work
    assert np.asarray(x).tolist() == [1.0, 2.0] and isinstance(np.exp(x), tracer.Tensor)
    assert copy.deepcopy(x).tolist() == [1.0, 2.0] and pickle.loads(pickle.dumps(x)).tolist() == [1.0, 2.0]


def test_the_message_is_built_when_read():
    err = MissingTorchAttribute("'Tensor' object", "frobnicate", lambda: (_ for _ in ()).throw(AssertionError))
    assert err.name == "frobnicate"  # raising and catching it never called the candidates
    with pytest.raises(AssertionError):
        str(err)


def test_a_property_that_raises_attribute_error_is_not_reported_as_missing():
    class Odd(tracer.Tensor):
        @property
        def peculiar(self):
            raise AttributeError("inner")
    t = Odd(np.zeros(1))
    with pytest.raises(AttributeError, match="peculiar raised AttributeError"):
        t.peculiar  # noqa: B018


def test_things_torch_has_that_cannot_be_recorded_raise_what_to_do_instead():
    class Square(torch.autograd.Function):  # defining one works, as in torch
        @staticmethod
        def forward(ctx, x):
            return x * x

    with pytest.raises(NotImplementedError, match="Write the forward with tracer ops"):
        Square.apply(torch.ones(2))
    with pytest.raises(TypeError, match="model.state_dict"):
        torch.save(nn.Linear(1, 1), "never.pt")
    with pytest.raises(RuntimeError, match="mpiexec -n 2"):
        torch.multiprocessing.spawn(lambda rank: None, nprocs=2)
    with pytest.raises(NotImplementedError, match="state_dict"):
        torch.jit.save(nn.Linear(1, 1), "never.pt")
    with pytest.raises(TypeError, match="bfloat16"):
        tracer.ones(2).bfloat16()
    with pytest.raises(RuntimeError, match="init_process_group.*mpiexec -n 4"):
        torch.distributed.init_process_group("gloo", world_size=4, rank=0)


def test_data_dependent_ops_inside_a_trace_say_so():
    import autodiff
    w = tracer.ones(3)
    with pytest.raises(tracer.TraceError):
        autodiff.grad(lambda: tracer.nonzero(w).sum() * w.sum(), wrt=[w])()
