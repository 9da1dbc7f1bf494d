"""The compiler's error (hwgen.compiler.errors)."""

from hwgen.compiler import CompileError


def test_compile_error_names_the_layer_and_carries_the_figures():
    error = CompileError("too wide; limit 4", layer=2, resource="max_k", need=5, limit=4)
    assert isinstance(error, ValueError)
    assert str(error) == "layer 2: too wide; limit 4"
    assert (error.layer, error.resource, error.need, error.limit) == (2, "max_k", 5, 4)
    assert str(CompileError("too many layers")) == "network: too many layers"
