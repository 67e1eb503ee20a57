"""The lab's maps tell the truth: the map of lab/__init__.py names every floor (a folder
of lab/) once and nothing else, each floor's __init__.py names every module of its
folder once and nothing else, and every run that `python3 -m lab` knows is declared by
a RUNNER whose name is its command, in the runs' folder, and the other way round."""

import glob
import importlib
import os
import re
import unittest

import lab
from lab import __main__ as entry
from lab.base.common import REPO

LAB = os.path.join(REPO, "lab")


def map_names(doc):
    """The names on a map's entry lines: four spaces, the names, two spaces, the text."""
    names = []
    for line in doc.splitlines():
        m = re.match(r"    (\w+(?:, \w+)*)  ", line)
        if m:
            names += m.group(1).split(", ")
    return names


def floors():
    """The folders of lab/ that hold Python modules."""
    return sorted(os.path.basename(os.path.dirname(p))
                  for p in glob.glob(os.path.join(LAB, "*", "__init__.py")))


def modules(folder):
    """The modules of a folder (its __init__.py aside)."""
    return sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(folder, "*.py"))
                  if os.path.basename(p) != "__init__.py")


class MapTest(unittest.TestCase):
    def test_every_python_file_is_in_a_floor_or_the_entry(self):
        found = glob.glob(os.path.join(LAB, "**", "*.py"), recursive=True)
        stray = [p for p in found if os.path.relpath(p, LAB).count(os.sep) > 1]
        self.assertEqual(stray, [])
        self.assertEqual(modules(LAB), ["__main__"])

    def test_the_package_map_names_every_floor_once(self):
        self.assertEqual(sorted(map_names(lab.__doc__)), sorted(floors() + ["__main__"]))

    def test_each_floor_map_names_its_modules_once(self):
        for floor in floors():
            with self.subTest(floor=floor):
                doc = importlib.import_module(f"lab.{floor}").__doc__ or ""
                self.assertEqual(sorted(map_names(doc)), modules(os.path.join(LAB, floor)))

    def test_every_run_is_declared_by_its_runner(self):
        for module in entry.RUNS:
            self.assertIs(entry.COMMANDS[module.RUNNER.name], module.main)
            self.assertEqual(module.__name__, f"lab.runs.{module.RUNNER.name}")
        self.assertEqual(sorted(m.__name__.rsplit(".", 1)[1] for m in entry.RUNS),
                         modules(os.path.join(LAB, "runs")))


if __name__ == "__main__":
    unittest.main()
