"""The layering of the code base, checked on its source: the engine never imports the server, the
server and the benchmarks reach the engine only through its public API (the names `spanfill.engine`
exports), and nothing outside the engine imports an underscore name from it.

Tests may import the engine's submodules (they test its parts), but not its underscore names."""
from __future__ import annotations

import ast
from pathlib import Path

import spanfill.engine

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = set(spanfill.engine.__all__)
API_ONLY = ("server", "benchmarks", "editors", "examples")   # may use the public API only


def imports(path: Path, package: str):
    """(line, module, names) for every import in `path`, relative imports resolved against `package`
    (the dotted package the file belongs to, e.g. 'spanfill.engine.core')."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([module] if module else []))
            yield node.lineno, module, [alias.name for alias in node.names]


def package_of(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("").parts[:-1]
    if rel and rel[0] in ("engine", "server"):
        return ".".join(("spanfill",) + rel)
    return ".".join(rel)


def violations(root: Path, public: set[str] = PUBLIC) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in (".venv", "build", "node_modules") or "node_modules" in rel.parts:
            continue
        top = rel.parts[0]
        for line, module, names in imports(path, package_of(path, root)):
            where = f"{rel}:{line}"
            if top == "engine" and (module == "spanfill.server" or module.startswith("spanfill.server.")):
                found.append(f"{where}: the engine imports the server ({module})")
            if top == "engine" or not (module == "spanfill.engine" or module.startswith("spanfill.engine.")):
                continue
            private = [n for n in names if n.startswith("_")] + [p for p in module.split(".") if p.startswith("_")]
            if private:
                found.append(f"{where}: imports the engine's private {', '.join(private)} from {module}")
            if top in API_ONLY:
                if module != "spanfill.engine":
                    found.append(f"{where}: imports the engine's internals ({module}); use what spanfill.engine exports")
                else:
                    unknown = [n for n in names if n not in public]
                    if unknown:
                        found.append(f"{where}: {', '.join(unknown)} is not in spanfill.engine.__all__")
    return found


def test_the_code_base_keeps_its_layers():
    assert violations(ROOT) == []


def test_every_public_name_resolves():
    for name in spanfill.engine.__all__:
        assert getattr(spanfill.engine, name) is not None, name


def test_the_check_catches_each_kind_of_forbidden_import(tmp_path):
    def tree(files: dict[str, str]) -> Path:
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        return root

    clean = tree({"engine/decoding/a.py": "from ..api import CompletionRequest\n",
                  "server/b.py": "from spanfill.engine import Engine\n",
                  "tests/c.py": "from spanfill.engine.decoding.denoise import denoise\n"})
    assert violations(clean, {"Engine"}) == []
    cases = {
        "engine/tools/a.py": ("from spanfill.server.postprocess import finish\n", "the engine imports the server"),
        "engine/b.py": ("import spanfill.server.lsp\n", "the engine imports the server"),
        "server/c.py": ("from spanfill.engine.decoding.prompt import cut_prefix\n", "internals"),
        "benchmarks/d.py": ("from spanfill.engine import ContextCache\n", "not in spanfill.engine.__all__"),
        "tests/e.py": ("from spanfill.engine.core.model import _rope\n", "private _rope"),
    }
    for name, (text, message) in cases.items():
        (found,) = violations(tree({name: text}), {"Engine"})
        assert message in found and name in found
