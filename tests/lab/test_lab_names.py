"""The lab learns what a strategy is from GET /strategies, never from its name: no lab
source names one of stockd's strategies in a string literal (the raw limits read the
names their C files register instead)."""

import glob
import os
import re
import unittest

from lab.base.common import REPO
from lab.client import sources

LAB_FILES = (glob.glob(os.path.join(REPO, "lab", "**", "*.py"), recursive=True)
             + [p for p in glob.glob(os.path.join(REPO, "bench", "*")) if os.path.isfile(p)]
             + glob.glob(os.path.join(REPO, "bench", "peer", "*.js"))
             + [os.path.join(REPO, "jmeter", "compare")]
             + glob.glob(os.path.join(REPO, "tests", "**", "test_lab*.py"), recursive=True)
             + [os.path.join(REPO, "tests", "lab", "fakestockd.py")])


class NamesTest(unittest.TestCase):
    def test_no_strategy_named_in_a_literal(self):
        names = {sources.strategy_name(p)
                 for p in glob.glob(os.path.join(sources.STRATEGIES, "*.c"))}
        self.assertGreater(len(names), 5)
        quoted = re.compile(r"""["'](%s)["'/?]""" % "|".join(re.escape(n) for n in names))
        found = []
        for path in LAB_FILES:
            if os.path.basename(path).endswith(".md"):
                continue
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if quoted.search(line):
                        found.append(f"{os.path.relpath(path, REPO)}:{n}: {line.strip()}")
        self.assertEqual(found, [])


if __name__ == "__main__":
    unittest.main()
