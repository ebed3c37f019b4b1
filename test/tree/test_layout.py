"""Each gateware module's test is found in one step: test/gateware/test_X.py, or the row of
test/README.md that names where it is tested; and every test file sits in a level's folder."""

import re

from conftest import REPO

README = (REPO / "test" / "README.md").read_text()
LEVELS = set(re.findall(r"^\| `(\w+)/` \|", README, re.M))
ELSEWHERE = dict(re.findall(r"^\| `gateware/(\w+)\.py` \| (.+) \|$", README, re.M))


def test_every_gateware_module_has_its_own_test_or_a_row_naming_where_it_is_tested():
    modules = {p.stem for p in (REPO / "gateware").glob("*.py") if p.stem != "__init__"}
    untested = sorted(m for m in modules if not (REPO / "test" / "gateware" / f"test_{m}.py").exists()
                      and m not in ELSEWHERE)
    assert not untested, f"gateware modules with no test/gateware/test_X.py and no row in test/README.md: {untested}"
    for module, files in ELSEWHERE.items():
        assert module in modules, f"test/README.md names gateware/{module}.py, which does not exist"
        for f in re.findall(r"`([\w/]+\.py)`", files):
            assert (REPO / "test" / f).exists(), f"test/README.md: gateware/{module}.py is tested in {f}, which does not exist"
            assert module in (REPO / "test" / f).read_text(), f"test/{f} never names {module}"


def test_every_test_file_is_in_a_level_folder_the_readme_describes():
    assert LEVELS >= {"gateware", "firmware", "host", "system", "builds"}
    assert not list((REPO / "test").glob("test_*.py")), "test files belong in a level's folder (test/README.md)"
    for f in (REPO / "test").rglob("test_*.py"):
        assert f.parent.parent == REPO / "test" and f.parent.name in LEVELS, \
            f"{f.relative_to(REPO)} is not in one of test/README.md's folders {sorted(LEVELS)}"
