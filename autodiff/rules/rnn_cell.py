"""VJP rule of the recurrent-cell family (ir/ops/rnn_cell.py)."""
from __future__ import annotations

from ir import Tuple, const

from .registry import register_vjp


@register_vjp("nn.lstm_cell")
def nn_lstm_cell_vjp(b, call, out, g):
    """Forward: c' = sig(f) c + sig(i) tanh(g), h' = sig(o) tanh(c'), (i, f, g, o) = gates
    Backward: dgates, dc = grad.lstm_cell_backward(gates, c, dh', dc') (the activations recomputed)"""
    dh, dc = _fields_of(b, g)
    res = b.call("grad.lstm_cell_backward", call.args[0], call.args[1], dh, dc)
    return [b.get_item(res, 0), b.get_item(res, 1)]


class _E:
    """Arithmetic on IR values through the builder, so that the formulas below read as the math."""

    def __init__(self, b, v):
        self.b, self.v = b, v

    def _op(self, name, other):
        other = other.v if isinstance(other, _E) else const(other, self.v.type.dtype)
        return _E(self.b, self.b.call(name, self.v, other))

    def __add__(self, o):
        return self._op("add", o)

    def __sub__(self, o):
        return self._op("subtract", o)

    def __mul__(self, o):
        return self._op("multiply", o)

    def __rsub__(self, o):
        return _E(self.b, self.b.call("subtract", const(o, self.v.type.dtype), self.v))

    __radd__, __rmul__ = __add__, __mul__

    def call(self, name):
        return _E(self.b, self.b.call(name, self.v))


@register_vjp("grad.lstm_cell_backward")
def grad_lstm_cell_backward_vjp(b, call, out, g):
    """Forward: D = dc + dh so tc', Gi = D tg si', Gf = D c sf', Gg = D si tg', Go = dh tc so', Dc = D sf
    Backward: dL/d(inputs) of L = D K + uo dh tc so', K = ui tg si' + uf c sf' + ug si tg' + v sf"""
    # ' is the derivative: si' = si (1 - si), tg' = 1 - tg^2, tc = tanh(c2), c2 = sf c + si tg; (u., v) the
    # cotangents of (Gi, Gf, Gg, Go) and Dc; every term below is dL/d(input), written with primitives so
    # that it differentiates again
    gates, c, dh, dc = (_E(b, a) for a in call.args)
    parts = [_E(b, p) for p in _fields_of(b, b.call("split", gates.v, indices_or_sections=4, axis=1))]
    ug, v = _fields_of(b, g)
    ui, uf, ugg, uo = (_E(b, p) for p in _fields_of(b, b.call("split", ug, indices_or_sections=4, axis=1)))
    v = _E(b, v)
    si, sf, so = parts[0].call("sigmoid"), parts[1].call("sigmoid"), parts[3].call("sigmoid")
    tg = parts[2].call("tanh")
    dsi, dsf, dso, dtg = si * (1.0 - si), sf * (1.0 - sf), so * (1.0 - so), 1.0 - tg * tg
    tc = (sf * c + si * tg).call("tanh")
    dtc = 1.0 - tc * tc
    d = dc + dh * so * dtc
    k = ui * tg * dsi + uf * c * dsf + ugg * si * dtg + v * sf
    e = (k * dh * so * tc) * -2.0 + uo * dh * dso
    etc = e * dtc
    d_ai = d * (ui * tg * dsi * (1.0 - si * 2.0) + ugg * dtg * dsi) + etc * tg * dsi
    d_af = d * (uf * c * dsf * (1.0 - sf * 2.0) + v * dsf) + etc * c * dsf
    d_ag = d * (ui * dsi * dtg - ugg * si * tg * dtg * 2.0) + etc * si * dtg
    d_ao = k * dh * dtc * dso + uo * dh * tc * dso * (1.0 - so * 2.0)
    d_gates = b.call("concat", [d_ai.v, d_af.v, d_ag.v, d_ao.v], axis=1)
    return [d_gates, (d * uf * dsf + etc * sf).v, (k * so * dtc + uo * tc * dso).v, k.v]


def _fields_of(b, t):
    return list(t.fields) if isinstance(t, Tuple) else [b.get_item(t, i) for i in range(len(t.type.fields))]
