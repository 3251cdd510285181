#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails when an #include crosses a layer it may not.

The allowed module -> module edges are written once, in the table between the
`layers:begin` and `layers:end` markers of docs/architecture.md. A module is a
directory of src/isowatch/ (its name), daemon/ ("daemon"), or a directory of
collectors/ ("collectors/<name>", whose headers are included as "collectors/<name>/..."). A file
may include:
  - headers of its own module;
  - headers of the modules its row lists ("proto" is the generated isowatch/v1/);
  - never a header under an `internal/` directory of another module.
Tests and benchmarks are not checked: they may reach into what they test.

Usage: check_layers.py SOURCE_DIR [--matrix]
  --matrix  print which module includes which (file counts) instead of checking.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"isowatch/([^"]+)"', re.M)
COLLECTOR_INCLUDE = re.compile(r'^\s*#\s*include\s+"(collectors/[^"]+)"', re.M)


def read_allow_list(doc):
    text = open(doc, encoding="utf-8").read()
    m = re.search(r"<!-- layers:begin -->(.*?)<!-- layers:end -->", text, re.S)
    if not m:
        sys.exit(f"{doc}: no table between <!-- layers:begin --> and <!-- layers:end -->")
    allow = {}
    for line in m.group(1).splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("module", "") or set(cells[0]) <= set("-: "):
            continue
        deps = [d.strip().strip("`") for d in cells[1].split(",")]
        allow[cells[0]] = {d for d in deps if d and d != "—"}
    return allow


def module_of_source(rel):
    parts = rel.split("/")
    if parts[0] == "src" and len(parts) > 3 and parts[1] == "isowatch":
        return parts[2]
    if parts[0] == "daemon":
        return "daemon"
    if parts[0] == "collectors" and len(parts) > 2:
        return "collectors/" + parts[1]
    return None


def module_of_include(path):
    # path is what follows "isowatch/" in the include, or the whole "collectors/..." path.
    parts = path.split("/")
    if parts[0] == "collectors":
        return "/".join(parts[:2])
    return "proto" if parts[0] == "v1" else parts[0]


def includes(text):
    """The includes of the project's headers in `text`, as paths for module_of_include."""
    return INCLUDE.findall(text) + COLLECTOR_INCLUDE.findall(text)


def shown(inc):
    return f'"{inc}"' if inc.startswith("collectors/") else f'"isowatch/{inc}"'


def sources(root):
    for top in ("src/isowatch", "daemon", "collectors"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith((".h", ".cc")):
                    full = os.path.join(dirpath, f)
                    yield os.path.relpath(full, root), full


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    matrix_only = "--matrix" in sys.argv[2:]
    allow = {} if matrix_only else read_allow_list(os.path.join(root, "docs", "architecture.md"))
    errors = []
    matrix = {}
    for rel, full in sources(root):
        mod = module_of_source(rel)
        if mod is None:
            continue
        if mod not in allow and not matrix_only:
            errors.append(f"{rel}: module '{mod}' has no row in docs/architecture.md")
            continue
        text = open(full, encoding="utf-8").read()
        for inc in includes(text):
            target = module_of_include(inc)
            if target == mod:
                continue
            matrix.setdefault(mod, {}).setdefault(target, set()).add(rel)
            if matrix_only:
                continue
            if "/internal/" in inc:
                errors.append(f"{rel}: includes {shown(inc)}, internal to module '{target}'")
            elif target not in allow[mod]:
                errors.append(
                    f"{rel}: includes {shown(inc)}: '{mod}' may not depend on '{target}' "
                    f"(allowed: {', '.join(sorted(allow[mod])) or 'nothing'})")
    if matrix_only:
        for mod in sorted(matrix):
            row = ", ".join(f"{t} ({len(fs)})" for t, fs in sorted(matrix[mod].items()))
            print(f"{mod}: {row}")
        return 0
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} include(s) cross a layer; the allowed edges are in "
              "docs/architecture.md (layers:begin)")
        return 1
    print(f"check_layers: every include of src/, daemon/ and collectors/ follows the allowed edges "
          f"({len(allow)} modules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
