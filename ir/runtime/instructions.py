"""The executor's instruction kinds, shared by the executor, its code generator and storage planner.

CALL runs an op's kernel; SPEC a kernel specialised to the binding's types (`ir.runtime.specialize`);
TUPLE, GETITEM and ALIAS build a tuple, read one of its fields, or bind a second name to a value.
"""
CALL, TUPLE, GETITEM, ALIAS, SPEC = range(5)
