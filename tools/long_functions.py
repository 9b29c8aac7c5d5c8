"""The branching functions over a length limit in ``proxy/`` and ``rules/``: the house keeps each
under 60 lines (CONTRIBUTING.md). ``python -m tools.long_functions [ROOT] [--limit N]`` prints
``lines  path:line  name`` for each, longest first."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

_BRANCHES = (ast.If, ast.For, ast.While, ast.Try, ast.Match, ast.With, ast.IfExp, ast.BoolOp)


def long_functions(root: Path, limit: int = 60) -> list[tuple[int, str, str]]:
    found: list[tuple[int, str, str]] = []
    for package in ("proxy", "rules"):
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                branching = any(isinstance(inner, _BRANCHES) for inner in ast.walk(node))
                if length > limit and branching:
                    where = f"{path.relative_to(root)}:{node.lineno}"
                    found.append((length, where, node.name))
    return sorted(found, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=".")
    parser.add_argument("--limit", type=int, default=60)
    args = parser.parse_args()
    for length, where, name in long_functions(Path(args.root), args.limit):
        print(f"{length:4d}  {where}  {name}")


if __name__ == "__main__":
    main()
