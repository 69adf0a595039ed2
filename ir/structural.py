"""placeholder until written"""
def structural_equal(a, b): raise NotImplementedError
