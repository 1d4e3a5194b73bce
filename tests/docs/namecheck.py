"""Check the names a docs snippet takes from ``chain``, by importing them.

Run as a script (``test_python_snippets.py`` does, in a child process, so the
test's own process never imports torch or lightning): reads a JSON list of
``{"where", "lang", "code", "allowed"}`` on stdin and prints a JSON list of
problems. For a Python snippet:

* every name it reads is bound in it (imported, assigned, defined, a
  parameter, a loop or ``with`` target), a builtin, or listed in ``allowed``
  (the names its mark says the reader brings: ``<!-- test: check model -->``);
* every module of ``chain`` it imports imports, and every name it takes from
  one, or reads off one (``chain.app.ranks.agree``, ``Chain.submit_many``),
  exists;
* every call of something of ``chain`` binds to its signature (no unknown
  keyword, nothing required left out), and the settings given to
  ``Chain.submit``, ``resume`` and ``submit_many`` are settings.

For a YAML snippet, each ``class_path`` naming something of ``chain``
resolves and its ``init_args`` are parameters of it.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import json
import sys
import types
from collections.abc import Iterator
from typing import Any

API_KEYWORDS = {"workdir", "chain_dir", "config", "environ", "backend", "on_message"}


def _is_chain(module: str | None) -> bool:
    return module is not None and (module == "chain" or module.startswith("chain."))


def bound_names(tree: ast.AST) -> set[str]:
    """Every name the snippet binds, in any scope (a lenient check)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, ast.Call) and _is_globals_update(node):
            names.update(k.arg for k in node.keywords if k.arg)
    return names


def _is_globals_update(node: ast.Call) -> bool:
    """``globals().update(stop=True)``: binds ``stop`` (the quick start's app)."""
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "update"
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "globals"
    )


def _import(name: str) -> Any:
    return importlib.import_module(name)


def _attribute(obj: Any, name: str, owner: str) -> Any:
    """``obj.name``; a submodule of a package is imported first."""
    if isinstance(obj, types.ModuleType) and not hasattr(obj, name):
        try:
            return _import(f"{obj.__name__}.{name}")
        except ImportError:
            pass
    if not hasattr(obj, name):
        raise LookupError(f"{owner} has no {name!r}")
    return getattr(obj, name)


class Instance:
    """A value known to be an instance of a class of ``chain``."""

    def __init__(self, cls: type) -> None:
        self.cls = cls


def _instance_has(cls: type, name: str) -> bool:
    if hasattr(cls, name):
        return True
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}) or name in getattr(klass, "__dataclass_fields__", {}):
            return True
        init = klass.__dict__.get("__init__")
        if init is not None:
            try:
                source = inspect.getsource(init)
            except (OSError, TypeError):
                continue
            if f"self.{name} =" in source or f"self.{name}:" in source:
                return True
    return False


class Checker:
    def __init__(self, where: str) -> None:
        self.where = where
        self.problems: dict[str, None] = {}  # in order, each once
        self.known: dict[str, Any] = {}  # local name -> a chain module, class, function or Instance

    def problem(self, node: ast.AST, text: str) -> None:
        line = getattr(node, "lineno", 0)
        self.problems.setdefault(f"{self.where} (line {line} of the block): {text}")

    def imports(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if not _is_chain(alias.name):
                        continue
                    try:
                        module = _import(alias.name)
                    except ImportError as exc:
                        self.problem(node, f"import {alias.name}: {exc}")
                        continue
                    if alias.asname:
                        self.known[alias.asname] = module
                    else:
                        self.known["chain"] = _import("chain")
            elif isinstance(node, ast.ImportFrom) and _is_chain(node.module) and node.level == 0:
                try:
                    module = _import(node.module)  # type: ignore[arg-type]
                except ImportError as exc:
                    self.problem(node, f"from {node.module} import ...: {exc}")
                    continue
                for alias in node.names:
                    try:
                        self.known[alias.asname or alias.name] = _attribute(module, alias.name, node.module or "")
                    except LookupError as exc:
                        self.problem(node, f"from {node.module} import {alias.name}: {exc}")

    def resolve(self, node: ast.expr) -> Any:
        """What an expression names, when it is something of chain (else None)."""
        if isinstance(node, ast.Name):
            return self.known.get(node.id)
        if isinstance(node, ast.Attribute):
            owner = self.resolve(node.value)
            if owner is None:
                return None
            if isinstance(owner, Instance):
                if not _instance_has(owner.cls, node.attr):
                    self.problem(node, f"{owner.cls.__name__} objects have no {node.attr!r}")
                    return None
                found = inspect.getattr_static(owner.cls, node.attr, None)
                if inspect.isfunction(found):  # a method, bound to some instance
                    return types.MethodType(found, object())
                return None
            try:
                return _attribute(owner, node.attr, getattr(owner, "__name__", repr(owner)))
            except LookupError as exc:
                self.problem(node, str(exc))
                return None
        if isinstance(node, ast.Call):
            func = self.resolve(node.func)
            if inspect.isclass(func):
                return Instance(func)
            returns = _returned_class(func)
            return Instance(returns) if returns is not None else None
        return None

    def calls(self, tree: ast.AST) -> None:
        assigns = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and len(n.targets) == 1]
        for node in sorted(assigns, key=lambda n: n.lineno):  # in the order a reader runs them
            if isinstance(node.targets[0], ast.Name):
                value = self.resolve(node.value)
                if isinstance(value, Instance):
                    self.known[node.targets[0].id] = value
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                self.resolve(node)
            if not isinstance(node, ast.Call):
                continue
            func = self.resolve(node.func)
            if func is None or isinstance(func, Instance) or not callable(func):
                continue
            self.bind(node, func)

    def bind(self, node: ast.Call, func: Any) -> None:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return
        try:
            signature = inspect.signature(func)
        except (TypeError, ValueError):
            return
        name = getattr(func, "__qualname__", getattr(func, "__name__", "?"))
        try:
            signature.bind(*range(len(node.args)), **{k.arg: None for k in node.keywords if k.arg})
        except TypeError as exc:
            self.problem(node, f"{name}(...): {exc}")
            return
        if name in ("Chain.submit", "Chain.resume"):
            self.settings(node, [k.arg for k in node.keywords if k.arg], signature)
        if name == "Chain.submit_many" and node.args:
            for spec in ast.walk(node.args[0]):
                if isinstance(spec, ast.Dict):
                    keys = [k.value for k in spec.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
                    self.settings(spec, [k for k in keys if k not in API_KEYWORDS], None)

    def settings(self, node: ast.AST, names: list[str], signature: inspect.Signature | None) -> None:
        from chain.core.fields import FIELD_BY_NAME

        own = set(signature.parameters) if signature else set()
        for name in names:
            if name not in own and name not in FIELD_BY_NAME:
                self.problem(node, f"{name!r} is not a setting")


def _returned_class(func: Any) -> type | None:
    """The class a classmethod of chain returns instances of (``AppEnv.from_environ``)."""
    owner = getattr(func, "__self__", None)
    if not inspect.isclass(owner):
        return None
    try:
        annotation = inspect.signature(func).return_annotation
    except (TypeError, ValueError):
        return None
    return owner if annotation in (owner, owner.__name__, "Self") else None


def check_python(where: str, code: str, allowed: list[str]) -> list[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [f"{where}: not Python: {exc}"]
    checker = Checker(where)
    known = bound_names(tree) | set(dir(builtins)) | set(allowed)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in known:
            checker.problem(node, f"{node.id!r} is used but never defined (define it, or name it in the block's mark)")
    checker.imports(tree)
    checker.calls(tree)
    return list(checker.problems)


def _class_paths(value: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(value, dict):
        if isinstance(value.get("class_path"), str):
            yield value["class_path"], dict(value.get("init_args") or {})
        for item in value.values():
            yield from _class_paths(item)
    elif isinstance(value, list):
        for item in value:
            yield from _class_paths(item)


def check_yaml(where: str, code: str) -> list[str]:
    import yaml

    problems = []
    for path, init_args in _class_paths(yaml.safe_load(code)):
        module, _, name = path.rpartition(".")
        if not _is_chain(module):
            continue
        try:
            cls = _attribute(_import(module), name, module)
        except (ImportError, LookupError) as exc:
            problems.append(f"{where}: class_path {path}: {exc}")
            continue
        params = inspect.signature(cls).parameters
        for arg in init_args:
            if arg not in params:
                problems.append(f"{where}: {path} takes no {arg!r}")
    return problems


def main() -> None:
    problems: list[str] = []
    for snippet in json.load(sys.stdin):
        if snippet["lang"] == "yaml":
            problems += check_yaml(snippet["where"], snippet["code"])
        else:
            problems += check_python(snippet["where"], snippet["code"], snippet.get("allowed", []))
    json.dump(problems, sys.stdout)


if __name__ == "__main__":
    main()
