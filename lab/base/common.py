"""What every part of the lab shares: the error that means "this run cannot be made"
(exit status 2), progress lines on stderr, options that read a flag or an environment
variable, and the timestamped results directory."""

import argparse
import datetime
import math
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
# The stock of runs that measure rather than sell out (bench, chaos, soak).
ENDLESS_STOCK = 1_000_000_000
# The longest wait for stockd to go idle before a ledger is read.
SETTLE_S = 15


class SetupError(Exception):
    """The run cannot be made (exit status 2); the message is one clear line."""


class Progress:
    """Progress lines on stderr, prefixed with the program's name."""

    def __init__(self, prog):
        self.prog = prog

    def __call__(self, *words):
        print(f"{self.prog}:", *words, file=sys.stderr, flush=True)


def env_default(names, default):
    """The first non-empty environment variable of `names`, else `default`."""
    for n in names:
        v = os.environ.get(n)
        if v not in (None, ""):
            return v
    return default


class Options:
    """argparse flags that also read environment variables (so `make compare THREADS=20`
    works whether or not the Makefile passes it on); an empty value means the default."""

    def __init__(self, prog, description):
        self.parser = argparse.ArgumentParser(
            prog=prog, description=description,
            formatter_class=argparse.RawDescriptionHelpFormatter)
        self.specs = []
        self.at_least = {}

    def add(self, flag, env, default, kind=str, help="", minimum=None):
        shown = "(none)" if default == "" else default
        self.parser.add_argument(flag, default=None,
                                 help=f"{help} (env {'/'.join(env)}; default {shown})")
        dest = flag.lstrip("-").replace("-", "_")
        self.specs.append((dest, env, default, kind))
        if minimum is not None:
            self.at_least[dest] = minimum

    def flag(self, flag, help):
        self.parser.add_argument(flag, action="store_true", help=help)

    def parse(self, argv):
        ns = self.parser.parse_args(argv)
        for dest, env, default, kind in self.specs:
            v = getattr(ns, dest)
            if v in (None, ""):
                v = env_default(env, default)
            try:
                setattr(ns, dest, kind(v))
            except ValueError:
                self.parser.error(f"--{dest.replace('_', '-')}: not a {kind.__name__}: {v!r}")
        for dest, low in self.at_least.items():
            if getattr(ns, dest) < low:
                word = "must not be negative" if low == 0 else f"must be at least {low}"
                self.parser.error(f"--{dest.replace('_', '-')} {word}")
        return ns


def comma_list(text):
    return [w.strip() for w in text.split(",") if w.strip()]


def percentile(sorted_values, p):
    """Nearest-rank percentile of an ascending list; None when it is empty."""
    if not sorted_values:
        return None
    k = max(1, int(math.ceil(p / 100.0 * len(sorted_values))))
    return sorted_values[k - 1]


def slug(label):
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("_") or "row"


def tail(path, n=20):
    try:
        with open(path, "rb") as f:
            return b"".join(f.readlines()[-n:]).decode("utf-8", "replace")
    except OSError:
        return "(no log)"


def elapsed_line(seconds):
    """How long a run took, as its last line says it: "elapsed 4m05s"."""
    return f"elapsed {int(seconds // 60)}m{int(seconds % 60):02d}s"


def now_iso():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def ensure_writable(results_dir):
    """Fail early, one line, when results cannot be written under results_dir."""
    try:
        os.makedirs(results_dir, exist_ok=True)
    except OSError as e:
        raise SetupError(f"cannot write results under {results_dir}: "
                         f"{e.strerror or e} (set RESULTS_DIR or --results-dir)") from None
    if not os.access(results_dir, os.W_OK | os.X_OK):
        raise SetupError(f"cannot write results under {results_dir}: not writable "
                         "(set RESULTS_DIR or --results-dir)")


def make_out_dir(results_dir, prefix="", latest="latest"):
    """results_dir/<prefix><timestamp>/, and results_dir/<latest> pointing at it.
    An unwritable results directory is a SetupError, one line."""
    stamp = prefix + datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    try:
        os.makedirs(results_dir, exist_ok=True)
        name, n = stamp, 1
        while True:
            try:
                os.mkdir(os.path.join(results_dir, name))
                break
            except FileExistsError:
                n += 1
                name = f"{stamp}-{n}"
        link = os.path.join(results_dir, latest)
        tmp = os.path.join(results_dir, f".{latest}.{os.getpid()}")
        os.symlink(name, tmp)
        os.replace(tmp, link)
    except OSError as e:
        raise SetupError(f"cannot write results under {results_dir}: "
                         f"{e.strerror or e} (set RESULTS_DIR or --results-dir)") from None
    return os.path.join(results_dir, name)


def write_text(path, text):
    """Write a results file; a failure is a SetupError, one line."""
    try:
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    except OSError as e:
        raise SetupError(f"cannot write {path}: {e.strerror or e}") from None

