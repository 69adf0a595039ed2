"""A frozen parameter (requires_grad_(False)) gets no gradient from value_and_grad, as torch leaves .grad None."""
import numpy as np

import autodiff
import nn
from nn import optim


def test_frozen_parameter_gets_none_and_stays_put():
    model = nn.Linear(3, 2)
    model.weight.requires_grad_(False)
    before = model.weight.numpy().copy()
    step = autodiff.value_and_grad(lambda x: model(x).sum(), wrt=model.parameters())
    x = np.ones((4, 3), "float32")
    _, (gw, gb) = step(x)
    assert gw is None
    np.testing.assert_allclose(gb.numpy(), [4.0, 4.0])
    opt = optim.SGD(model.parameters(), lr=0.1)
    opt.step([gw, gb])
    np.testing.assert_array_equal(model.weight.numpy(), before)
    model.weight.requires_grad_(True)  # unfrozen: the same step now differentiates it
    _, (gw, _) = step(x)
    np.testing.assert_allclose(gw.numpy(), np.full((2, 3), 4.0))
