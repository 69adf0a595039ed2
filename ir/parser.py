"""placeholder until written"""
def parse(text): raise NotImplementedError
