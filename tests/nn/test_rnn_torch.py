"""RNN, LSTM, GRU, their cells and nn.utils.rnn against torch: state-dict keys, outputs, final states and every
gradient, eagerly, in value_and_grad and with loss.backward() (float64 and float32)."""
import numpy as np
import pytest

import nn
import tracer
from nn.utils import rnn as R

from .torch_triple import compare

rng = np.random.default_rng(0)


def _x(*shape, dtype="float64"):
    return rng.standard_normal(shape).astype(dtype)


D = "float64"

# name: (ours, torch's from (tnn, torch dtype), inputs, call or None, dtype)
CASES = {
    "lstm_2_layers_bidirectional_batch_first_given_state": (
        lambda: nn.LSTM(3, 4, num_layers=2, batch_first=True, bidirectional=True, dtype=D),
        lambda tnn, T: tnn.LSTM(3, 4, num_layers=2, batch_first=True, bidirectional=True, dtype=T),
        lambda: [_x(2, 4, 3), _x(4, 2, 4), _x(4, 2, 4)], lambda m, lib, x, h, c: m(x, (h, c)), D),
    "lstm_float32_default_state": (lambda: nn.LSTM(3, 5), lambda tnn, T: tnn.LSTM(3, 5),
                                   lambda: [_x(4, 2, 3, dtype="float32")], None, "float32"),
    "lstm_proj_size": (lambda: nn.LSTM(3, 5, proj_size=2, num_layers=2, dtype=D),
                       lambda tnn, T: tnn.LSTM(3, 5, proj_size=2, num_layers=2, dtype=T), lambda: [_x(3, 2, 3)],
                       None, D),
    "gru_2_layers_bidirectional_given_state": (
        lambda: nn.GRU(3, 4, num_layers=2, bidirectional=True, dtype=D),
        lambda tnn, T: tnn.GRU(3, 4, num_layers=2, bidirectional=True, dtype=T),
        lambda: [_x(4, 2, 3), _x(4, 2, 4)], None, D),
    "gru_float32_no_bias": (lambda: nn.GRU(3, 4, bias=False), lambda tnn, T: tnn.GRU(3, 4, bias=False),
                            lambda: [_x(3, 2, 3, dtype="float32")], None, "float32"),
    "rnn_relu_no_bias_batch_first": (lambda: nn.RNN(3, 4, nonlinearity="relu", bias=False, batch_first=True, dtype=D),
                                     lambda tnn, T: tnn.RNN(3, 4, nonlinearity="relu", bias=False, batch_first=True,
                                                            dtype=T), lambda: [_x(2, 4, 3)], None, D),
    "rnn_tanh_unbatched_given_state": (lambda: nn.RNN(3, 4, num_layers=2, dtype=D),
                                       lambda tnn, T: tnn.RNN(3, 4, num_layers=2, dtype=T),
                                       lambda: [_x(4, 3), _x(2, 4)], None, D),
    "lstm_unbatched_bidirectional": (lambda: nn.LSTM(3, 4, bidirectional=True, dtype=D),
                                     lambda tnn, T: tnn.LSTM(3, 4, bidirectional=True, dtype=T),
                                     lambda: [_x(3, 3), _x(2, 4), _x(2, 4)], lambda m, lib, x, h, c: m(x, (h, c)), D),
    "lstm_cell": (lambda: nn.LSTMCell(3, 4, dtype=D), lambda tnn, T: tnn.LSTMCell(3, 4, dtype=T),
                  lambda: [_x(2, 3), _x(2, 4), _x(2, 4)], lambda m, lib, x, h, c: m(x, (h, c)), D),
    "lstm_cell_unbatched_default_state": (lambda: nn.LSTMCell(3, 4, dtype=D), lambda tnn, T: tnn.LSTMCell(3, 4, dtype=T),
                                          lambda: [_x(3)], None, D),
    "gru_cell_float32": (lambda: nn.GRUCell(3, 4), lambda tnn, T: tnn.GRUCell(3, 4),
                         lambda: [_x(2, 3, dtype="float32"), _x(2, 4, dtype="float32")], None, "float32"),
    "rnn_cell_relu_no_bias": (lambda: nn.RNNCell(3, 4, bias=False, nonlinearity="relu", dtype=D),
                              lambda tnn, T: tnn.RNNCell(3, 4, bias=False, nonlinearity="relu", dtype=T),
                              lambda: [_x(2, 3)], None, D),
}


@pytest.mark.parametrize("name", CASES)
def test_recurrent_layer_matches_torch(name):
    torch = pytest.importorskip("torch")
    make, make_torch, inputs, call, dtype = CASES[name]
    compare(torch, make(), make_torch(torch.nn, getattr(torch, dtype)), inputs(), call, dtype)


def _packed_call(m, lib, x, lengths, h):
    pack = lib.nn.utils.rnn.pack_padded_sequence if lib is not tracer else R.pack_padded_sequence
    out, hn = m(pack(x, lengths, batch_first=True, enforce_sorted=False), h)
    return out, hn


def test_packed_sequence_gives_torch_outputs_and_final_states_for_each_length():
    torch = pytest.importorskip("torch")
    lengths = [2, 4, 1]
    ours = nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True, dtype=D)
    theirs = torch.nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True, dtype=torch.float64)
    compare(torch, ours, theirs, [_x(3, 4, 3), lengths, _x(4, 3, 4)], _packed_call, D)


def test_packed_lstm_sorted_and_padded_back():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.LSTM(2, 3, bidirectional=True, dtype=D), torch.nn.LSTM(2, 3, bidirectional=True,
                                                                             dtype=torch.float64)

    def call(m, lib, x):
        rnn = lib.nn.utils.rnn if lib is not tracer else R
        out, state = m(rnn.pack_padded_sequence(x, [4, 3, 1]))
        padded, lens = rnn.pad_packed_sequence(out, total_length=5)
        return padded, state
    compare(torch, ours, theirs, [_x(4, 3, 2)], call, D)


def test_dropout_between_layers_only_in_training():
    torch = pytest.importorskip("torch")
    # p = 1 drops layer 0's whole output (deterministic in both libraries), and never the last layer's
    make = lambda: nn.LSTM(3, 4, num_layers=2, dropout=1.0, dtype=D)  # noqa: E731
    theirs = lambda: torch.nn.LSTM(3, 4, num_layers=2, dropout=1.0, dtype=torch.float64)  # noqa: E731
    compare(torch, make(), theirs(), [_x(3, 2, 3)], dtype=D, train=True)
    compare(torch, make(), theirs(), [_x(3, 2, 3)], dtype=D, train=False)
    m = make().train()
    out, (h, _) = m(_x(3, 2, 3))
    assert np.abs(out.numpy()).max() > 0  # the last layer is not dropped


def test_pad_pack_utilities_match_torch():
    torch = pytest.importorskip("torch")
    seqs = [_x(3, 2), _x(5, 2), _x(1, 2)]
    for batch_first in (False, True):
        for side in ("right", "left"):
            got = R.pad_sequence([tracer.tensor(s) for s in seqs], batch_first, -1.0, side).numpy()
            want = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first, -1.0, side)
            np.testing.assert_array_equal(got, want.numpy())
    padded = _x(5, 3, 2)
    ours = R.pack_padded_sequence(padded, [3, 5, 1], enforce_sorted=False)
    theirs = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(padded), [3, 5, 1], enforce_sorted=False)
    for field in ("data", "batch_sizes", "sorted_indices", "unsorted_indices"):
        np.testing.assert_array_equal(getattr(ours, field).numpy(), getattr(theirs, field).numpy(), err_msg=field)
    assert ours.batch_sizes.dtype == "int64"
    back, lengths = R.pad_packed_sequence(ours, batch_first=True, padding_value=7.0, total_length=6)
    t_back, t_lengths = torch.nn.utils.rnn.pad_packed_sequence(theirs, batch_first=True, padding_value=7.0,
                                                               total_length=6)
    np.testing.assert_array_equal(back.numpy(), t_back.numpy())
    np.testing.assert_array_equal(lengths.numpy(), t_lengths.numpy())
    packed = R.pack_sequence([tracer.tensor(s) for s in seqs], enforce_sorted=False)
    t_packed = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(packed.data.numpy(), t_packed.data.numpy())


def test_init_state_dict_keys_and_errors():
    torch = pytest.importorskip("torch")
    m = nn.LSTM(3, 16, num_layers=2, bidirectional=True, proj_size=4)
    t = torch.nn.LSTM(3, 16, num_layers=2, bidirectional=True, proj_size=4)
    assert {k: v.shape for k, v in m.state_dict().items()} == {k: tuple(v.shape) for k, v in t.state_dict().items()}
    values = np.concatenate([p.numpy().ravel() for p in m.parameters()])
    assert values.dtype == np.float32 and np.abs(values).max() <= 0.25 and values.std() > 0.1  # U(-1/4, 1/4)
    assert repr(nn.GRU(3, 4, num_layers=2, batch_first=True)) == repr(torch.nn.GRU(3, 4, num_layers=2,
                                                                                   batch_first=True))
    with pytest.raises(ValueError, match="input_size. Expected 3, got 2"):
        nn.LSTM(3, 4)(np.zeros((2, 1, 2), "float32"))
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        nn.rnn._RNNBase("GRU", 3, 4, proj_size=2)
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 4\), got \(1, 3, 4\)"):
        nn.GRU(3, 4)(np.zeros((5, 2, 3), "float32"), np.zeros((1, 3, 4), "float32"))
    with pytest.raises(RuntimeError, match="must be sorted in decreasing order"):
        R.pack_padded_sequence(np.zeros((3, 2, 1)), [1, 3])
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        nn.RNN(3, 4, nonlinearity="gelu")
