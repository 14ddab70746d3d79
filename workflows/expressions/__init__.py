"""CEL expressions inside ``{{ … }}`` (docs/workflows.md, Expressions).

evaluate.py finds, compiles, evaluates and renders them; functions.py holds the functions they
may call (go_time.py the Go time layouts of two of them, arguments.py what all of them share);
limits.py bounds an expression before the CEL library sees it; syntax.py parses one into a small
syntax tree, which check.py reads for what it uses (variables, steps, functions).
"""

from workflows.expressions.evaluate import (
    ExpressionError,
    compile_expression,
    evaluate,
    evaluate_condition,
    find_expressions,
    render,
    sole_expression,
)

__all__ = [
    "ExpressionError",
    "compile_expression",
    "evaluate",
    "evaluate_condition",
    "find_expressions",
    "render",
    "sole_expression",
]
