#!/usr/bin/env python3
"""extract.py lists the command-line flags of a Megatron-LM checkout, one
per line, for cmd/gotron's table of Megatron's flags (megatron_flags.txt).

It reads the sources without importing them (Python's ast): every
"--name" given to add_argument in megatron/training/arguments.py, and the
flags ArgumentGroupFactory derives from a config dataclass's fields
(--field-name; for a bool field that defaults to True, --no-field-name and
--disable-field-name; a field's argparse_meta arg_names when given), less
the names the factory is told to exclude. Only the names are kept.

    tools/megatron-flags/extract.py MEGATRON_DIR > cmd/gotron/megatron_flags.txt
"""
import ast
import os
import sys


def classes(root):
    """Every class definition under root/megatron, by name."""
    out = {}
    for dirpath, _, files in os.walk(os.path.join(root, "megatron")):
        for f in files:
            if not f.endswith(".py"):
                continue
            try:
                tree = ast.parse(open(os.path.join(dirpath, f), encoding="utf-8").read())
            except (SyntaxError, UnicodeDecodeError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    out.setdefault(node.name, node)
    return out


def literal_strings(node):
    """The string constants of a list, tuple or set literal (else none)."""
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def field_flags(cls, all_classes, exclude, seen=None):
    """The flags ArgumentGroupFactory makes of a dataclass and its bases."""
    seen = seen or set()
    if cls.name in seen:
        return []
    seen.add(cls.name)
    out = []
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in all_classes:
            out += field_flags(all_classes[base.id], all_classes, exclude, seen)
    for st in cls.body:
        if not isinstance(st, ast.AnnAssign) or not isinstance(st.target, ast.Name):
            continue
        name = st.target.id
        if name.startswith("_") or name in exclude:
            continue
        names = None
        if isinstance(st.value, ast.Call):  # field(default=..., metadata={"argparse_meta": {"arg_names": [...]}})
            for kw in st.value.keywords:
                if kw.arg == "metadata" and isinstance(kw.value, ast.Dict):
                    for k, v in zip(kw.value.keys, kw.value.values):
                        if isinstance(k, ast.Constant) and k.value == "argparse_meta" and isinstance(v, ast.Dict):
                            for k2, v2 in zip(v.keys, v.values):
                                if isinstance(k2, ast.Constant) and k2.value == "arg_names":
                                    names = literal_strings(v2)
        default_true = isinstance(st.value, ast.Constant) and st.value.value is True
        if isinstance(st.value, ast.Call):
            for kw in st.value.keywords:
                if kw.arg == "default" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                    default_true = True
        flag = name.replace("_", "-")
        if names:
            out += names
        elif default_true and isinstance(st.annotation, ast.Name) and st.annotation.id == "bool":
            out += ["--no-" + flag, "--disable-" + flag]
        else:
            out.append("--" + flag)
    return out


def main(root):
    path = os.path.join(root, "megatron", "training", "arguments.py")
    tree = ast.parse(open(path, encoding="utf-8").read())
    all_classes = classes(root)
    flags = set()
    lists = {}  # name = [...] assignments, for exclude=NAME
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if literal_strings(node.value):
                lists[node.targets[0].id] = literal_strings(node.value)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        if isinstance(fn, ast.Attribute) and fn.attr == "add_argument":
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--"):
                    flags.add(a.value)
        if isinstance(fn, ast.Name) and fn.id == "ArgumentGroupFactory" and node.args and isinstance(node.args[0], ast.Name):
            exclude = []
            for kw in node.keywords:
                if kw.arg == "exclude":
                    exclude = literal_strings(kw.value) or lists.get(getattr(kw.value, "id", ""), [])
            cls = all_classes.get(node.args[0].id)
            if cls is not None:
                flags.update(field_flags(cls, all_classes, set(exclude)))
    for f in sorted(flags):
        print(f)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: extract.py MEGATRON_DIR")
    main(sys.argv[1])
