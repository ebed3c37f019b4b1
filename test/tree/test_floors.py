"""The packages' floors (docs/architecture.md): every import of every module of the installed
packages, read with ast from the folders setup.py maps them to, goes down or stays inside its own
package, never up or sideways. bench/, test/ and examples/ may import anything."""

import ast

import pytest

from conftest import REPO

# Import name -> floor. A package imports its own modules and those of lower floors only: the wire
# formats and the package's small tools at the bottom, gateware and host beside each other (neither
# imports the other), the boards on the gateware, the SoC and its command line on top.
FLOORS = {
    "ethdaq":          0,
    "ethdaq.wire":     0,
    "ethdaq.gateware": 1,
    "ethdaq.host":     1,
    "ethdaq.boards":   2,
    "ethdaq.soc":      3,
}


def package_dirs():
    """setup.py's package_dir, {import name: folder}, read without running setup.py."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "package_dir":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no package_dir")


def package_of(name):
    """The package of FLOORS a dotted module name belongs to (the longest prefix), or None."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in FLOORS:
            return prefix
    return None


def modules():
    """(module name, path) of every Python file in the packages' folders."""
    dirs = package_dirs()
    # A folder mapped to a package that is inside another mapped folder belongs to that package.
    for package, folder in dirs.items():
        root = REPO / folder
        others = [REPO / f for p, f in dirs.items() if p != package and (REPO / f).is_relative_to(root)]
        for path in sorted(root.rglob("*.py")):
            if any(path.is_relative_to(o) for o in others):
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join([package, *parts]), path


def imported(module, path):
    """(line, dotted name) of every ethdaq module `path` imports, at any depth (in functions too);
    `from P import X` names P.X, which is X's module when X is one."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[:len(module.split(".")) - node.level + is_package]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name == "ethdaq" or name.startswith("ethdaq."):
                yield node.lineno, name


def violations(module, path):
    """The imports of `module` that go up a floor or sideways, one line each."""
    own = package_of(module)
    found = []
    for line, name in imported(module, path):
        target = package_of(name)
        if target != own and FLOORS[target] >= FLOORS[own]:
            where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
            found.append(f"{where}:{line}: {own} (floor {FLOORS[own]}) imports {name} "
                         f"({target}, floor {FLOORS[target]})")
    return found


def test_every_package_has_a_floor():
    """A package added to setup.py is given its floor here."""
    assert set(package_dirs()) <= set(FLOORS), f"packages without a floor: {set(package_dirs()) - set(FLOORS)}"


def test_packages_import_down_only():
    found = [v for module, path in modules() for v in violations(module, path)]
    assert not found, "imports going up or sideways:\n" + "\n".join(found)


@pytest.mark.parametrize("source, expected", [
    ("from ethdaq.soc import tools\n",       "ethdaq.gateware (floor 1) imports ethdaq.soc.tools (ethdaq.soc, floor 3)"),
    ("import ethdaq.host.ctl\n",             "ethdaq.gateware (floor 1) imports ethdaq.host.ctl (ethdaq.host, floor 1)"),
    ("def f():\n    from ethdaq import soc\n", "ethdaq.gateware (floor 1) imports ethdaq.soc (ethdaq.soc, floor 3)"),
    ("from ..soc.build import BuildError\n", "ethdaq.gateware (floor 1) imports ethdaq.soc.build.BuildError (ethdaq.soc, floor 3)"),
])
def test_an_import_going_up_is_found(tmp_path, source, expected):
    """The check itself: a gateware module importing the SoC or the host is caught, also inside a
    function and by a relative import."""
    path = tmp_path / "core.py"
    path.write_text(source)
    found = violations("ethdaq.gateware.core", path)
    assert len(found) == 1 and found[0].endswith(expected), found


def test_imports_going_down_pass(tmp_path):
    path = tmp_path / "core.py"
    path.write_text("from ethdaq.wire import daqformat\nfrom . import cdcfifo\nimport ethdaq.gateware.csr\nimport ethdaq\n")
    assert violations("ethdaq.gateware.core", path) == []


# The firmware's layers (docs/architecture.md, "The firmware's layout"): main calls services,
# services call drivers, drivers use the protocol's types; never the other way.
C_FLOORS = {"protocol": 0, "drivers": 1, "services": 2}


def c_includes(path):
    """The quoted #include lines of a C file: the folder of software/firmware/ each names (its
    own folder when it names none)."""
    own = path.relative_to(REPO / "software" / "firmware").parts[0]
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith('#include "'):
            name = line.split('"')[1]
            yield line, name.split("/")[0] if "/" in name and name.split("/")[0] in C_FLOORS else own


@pytest.mark.parametrize("folder", sorted(C_FLOORS))
def test_firmware_layers_include_only_lower_layers(folder):
    wrong = []
    for path in sorted((REPO / "software" / "firmware" / folder).rglob("*.[ch]")):
        for line, target in c_includes(path):
            if target != folder and C_FLOORS[target] >= C_FLOORS[folder]:
                wrong.append(f"{path.relative_to(REPO)}: {line}")
    assert not wrong, "firmware includes that go up or sideways:\n" + "\n".join(wrong)
