"""VJP rules of the create family: none. zeros, ones, full and the *_like ops are declared
non-differentiable (their outputs do not depend on any input's values)."""
