"""lab/ keeps its floors, as tests/checks/layers-check keeps server/'s: the floors are the map
of lab/__init__.py in its order, bottom to top; a module imports only from its own floor
and the floors below (lab/__main__.py, the entry, stands above them all); a run imports
no other run; and the modules' imports make no circle."""

import ast
import glob
import os
import unittest

import lab
from lab.base.common import REPO
from test_lab_map import map_names

LAB = os.path.join(REPO, "lab")
RUNS = "runs"


def floor_order():
    """The floors, bottom to top, as lab/__init__.py's map lists them."""
    return [n for n in map_names(lab.__doc__) if n != "__main__"]


def lab_modules():
    """{dotted name below lab: path} of every module of a floor."""
    out = {}
    for p in glob.glob(os.path.join(LAB, "*", "*.py")):
        floor, name = os.path.basename(os.path.dirname(p)), os.path.basename(p)[:-3]
        if name != "__init__":
            out[f"{floor}.{name}"] = p
    return out


def imported(path, floor, known):
    """The modules of a floor (floor.name) that the file at `path` imports: `from . import
    x`, `from .x import y`, `from ..f import x`, `from ..f.x import y`."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            parts = [floor if node.level == 1 else ""] + (node.module or "").split(".")
            head = ".".join(p for p in parts if p)
            out |= {f"{head}.{a.name}" if f"{head}.{a.name}" in known else head
                    for a in node.names}
    return out & set(known)


class LayersTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.order = floor_order()
        cls.modules = lab_modules()
        cls.graph = {m: imported(p, m.split(".")[0], cls.modules)
                     for m, p in cls.modules.items()}

    def test_the_map_lists_every_floor_once(self):
        self.assertEqual(sorted(self.order),
                         sorted({m.split(".")[0] for m in self.modules}))

    def test_imports_go_down_the_floors(self):
        up = []
        for m, deps in sorted(self.graph.items()):
            here = self.order.index(m.split(".")[0])
            up += [f"{m} imports {d}" for d in sorted(deps)
                   if self.order.index(d.split(".")[0]) > here]
        self.assertEqual(up, [])

    def test_no_run_imports_another_run(self):
        sideways = [f"{m} imports {d}" for m, deps in sorted(self.graph.items())
                    if m.split(".")[0] == RUNS for d in sorted(deps)
                    if d.split(".")[0] == RUNS and d != m]
        self.assertEqual(sideways, [])

    def test_no_circle(self):
        state, circles = {}, []

        def visit(m, path):
            state[m] = "open"
            for d in sorted(self.graph.get(m, ())):
                if state.get(d) == "open":
                    circles.append(" -> ".join(path[path.index(d):] + [d]))
                elif d not in state:
                    visit(d, path + [d])
            state[m] = "done"

        for m in sorted(self.graph):
            if m not in state:
                visit(m, [m])
        self.assertEqual(circles, [])

    def test_the_check_reads_the_imports(self):
        """The rules are not vacuous: the imports they judge are read, in each form."""
        self.assertIn("scaffold.runner", self.graph["runs.compare"])  # from ..f.x import y
        self.assertIn("client.facts", self.graph["runs.compare"])  # from ..f import x
        self.assertIn("judges.linearize", self.graph["judges.history"])  # from . import x
        self.assertIn("drivers.load", self.graph["drivers.buyers"])  # from .x import y


if __name__ == "__main__":
    unittest.main()
