"""torch.linalg's spellings: `tracer.linalg.vector_norm`, `matrix_norm`, `norm` and `cross` (tracer/products.py)."""
from .products import linalg_cross as cross
from .products import matrix_norm, norm, vector_norm

__all__ = ["cross", "matrix_norm", "norm", "vector_norm"]
