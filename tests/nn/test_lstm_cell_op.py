"""nn.LSTM and nn.LSTMCell run each time step's elementwise part as one nn.lstm_cell op (ir/ops/rnn_cell.py):
the trace holds one per step and layer, and saturated gates (float32, |pre-activation| up to 30) give torch's
values and gradients."""
import numpy as np
import pytest

import nn
import tracer
from tests.torch_optional import torch


def test_one_lstm_cell_op_per_step_and_layer():
    model = nn.LSTM(3, 4, num_layers=2)
    mod = tracer.trace(lambda x: model(x)[0].sum(), tracer.spec((5, 2, 3)))
    text = str(mod)
    assert text.count("nn.lstm_cell(") == 10
    assert "R.sigmoid(" not in text  # the gates no longer run as separate elementwise bindings


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_saturated_lstm_cell_matches_torch_float32():
    rng = np.random.default_rng(0)
    cell, ref = nn.LSTMCell(6, 5), torch.nn.LSTMCell(6, 5)
    for name, p in ref.named_parameters():
        w = (rng.standard_normal(p.shape) * 3).astype("float32")  # gates far into the sigmoid/tanh tails
        p.data = torch.tensor(w)
        getattr(cell, name).data = tracer.tensor(w)
    x = (rng.standard_normal((4, 6)) * 2).astype("float32")
    h0, c0 = (rng.standard_normal((4, 5)).astype("float32") for _ in range(2))
    xt, h0t, c0t = (torch.tensor(a, requires_grad=True) for a in (x, h0, c0))
    ht, ct = ref(xt, (h0t, c0t))
    (ht.sum() * 2 + (ct * ct).sum()).backward()
    xs, hs, cs = (tracer.tensor(a, requires_grad=True) for a in (x, h0, c0))
    h, c = cell(xs, (hs, cs))
    (h.sum() * 2 + (c * c).sum()).backward()
    np.testing.assert_allclose(h.numpy(), ht.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c.numpy(), ct.detach().numpy(), rtol=1e-5, atol=1e-6)
    for ours, theirs in ((xs, xt), (hs, h0t), (cs, c0t), (cell.weight_hh, ref.weight_hh), (cell.bias_ih, ref.bias_ih)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-5)
