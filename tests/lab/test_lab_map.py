"""The lab's two maps tell the truth: the module map of lab/__init__.py and the module
table of lab/README.md each name every module under lab/ once, and nothing else; and every
run that `python3 -m lab` knows is declared by a RUNNER whose name is its command."""

import glob
import os
import re
import unittest

import lab
from lab import __main__ as entry
from lab.base.common import REPO

# Every module of lab/, in whatever folder it stands.
MODULES = sorted(os.path.basename(p)[:-3]
                 for p in glob.glob(os.path.join(REPO, "lab", "**", "*.py"), recursive=True)
                 if os.path.basename(p) != "__init__.py")


def package_map():
    """The names on the map's entry lines: four spaces, the names, two spaces, the text."""
    names = []
    for line in lab.__doc__.splitlines():
        m = re.match(r"    (\w+(?:, \w+)*)  ", line)
        if m:
            names += m.group(1).split(", ")
    return names


def readme_table():
    """The names in the first column of lab/README.md's module table."""
    with open(os.path.join(REPO, "lab", "README.md"), encoding="utf-8") as f:
        text = f.read()
    table = text.split("| module | what it does |", 1)[1].split("\n\n", 1)[0]
    return [n for line in table.splitlines()[2:] for n in re.findall(r"`(\w+)`",
                                                                     line.split(" | ")[0])]


class MapTest(unittest.TestCase):
    def test_package_map_names_every_module_once(self):
        names = package_map()
        self.assertEqual(sorted(names), MODULES)

    def test_readme_table_names_every_module_once(self):
        names = readme_table()
        self.assertEqual(sorted(names), MODULES)

    def test_every_run_is_declared_by_its_runner(self):
        for module in entry.RUNS:
            self.assertIs(entry.COMMANDS[module.RUNNER.name], module.main)
            self.assertEqual(module.__name__, f"lab.runs.{module.RUNNER.name}")


if __name__ == "__main__":
    unittest.main()
