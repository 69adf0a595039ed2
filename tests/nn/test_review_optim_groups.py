"""Review of torch's param_groups in nn.optim: a group added after some steps starts its own step count, as
torch's state["step"] does, so bias corrections and step-dependent rates for it begin at step 1."""
import numpy as np
import pytest

import tracer
from nn import optim
from tests.torch_optional import torch

R = np.random.default_rng(5)
COUNTING = ["Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad", "Adadelta"]


@pytest.mark.parametrize("name", COUNTING)
def test_a_group_added_after_some_steps_counts_its_own_steps_as_torch(name):
    a0, b0 = R.normal(size=3), R.normal(size=3)
    a, b = tracer.tensor(a0.copy()), tracer.tensor(b0.copy())
    ta, tb = torch.tensor(a0.copy(), requires_grad=True), torch.tensor(b0.copy(), requires_grad=True)
    opt, topt = getattr(optim, name)([a], lr=0.1), getattr(torch.optim, name)([ta], lr=0.1)
    for _ in range(5):
        g = R.normal(size=3)
        opt.step([g])
        ta.grad = torch.tensor(g)
        topt.step()
    opt.add_param_group({"params": [b], "lr": 0.05})
    topt.add_param_group({"params": [tb], "lr": 0.05})
    for k in range(4):
        ga, gb = R.normal(size=3), None if k == 1 else R.normal(size=3)  # one step without b's gradient
        opt.step([ga, gb])
        ta.grad, tb.grad = torch.tensor(ga), None if gb is None else torch.tensor(gb)
        topt.step()
        np.testing.assert_allclose(a.numpy(), ta.detach().numpy(), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=1e-12, atol=1e-15)
    assert float(opt.state_dict()["state"][1]["step"]) == float(topt.state_dict()["state"][1]["step"]) == 3
