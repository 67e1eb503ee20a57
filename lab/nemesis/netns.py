"""The partition lab's network: one fresh network namespace that holds a whole
scenario, so that no cut, no address and no packet of it can reach anything else.

`enter(argv)` runs the lab again inside `unshare -n` (root only: as another user it
says so and the run is not made). Inside, before anything starts, `verify()` brings
the loopback up and refuses to go on unless `lo` is the namespace's only interface
and every route it has stays inside 127.0.0.0/8 (IPv6: ::1): a process in it that
tries any other address fails at once with "Network is unreachable".

Every process of a scenario has its own 127.0.0.N (listening there, and connecting
from there: stockd's --bind-source, Redis's bind), so `Cuts` can drop (or reject) the
packets between two addresses, both ways, with nftables rules that live in this namespace
only, and heal them again."""

import ipaddress
import json
import os
import subprocess
import sys

from ..base.common import SetupError
from ..stack.service import run_dir

INSIDE = "LAB_PARTITION_NETNS"  # set in the namespace's environment by enter()
TABLE = "stockd_partition"


def inside():
    return os.environ.get(INSIDE) == "1"


def not_root_reason():
    """Why the lab cannot make its namespace here, or None."""
    if os.geteuid() != 0:
        return ("needs root: it runs the scenario in a network namespace of its own "
                "(unshare -n) and cuts links there with nftables; run it as root")
    return None


def main(runner, argv):
    """A namespace run's entry (`python3 -m lab NAME`): inside the namespace, the run
    itself; outside, root checked (2 and why, if not), then the run again inside a
    fresh namespace."""
    if inside():
        return runner.main(argv)
    why = not_root_reason()
    if why:
        print(f"{runner.name}: {why}", file=sys.stderr)
        return 2
    return enter(argv, runner.name)


def enter(argv, module):
    """Runs `python3 -m lab MODULE argv` again inside a fresh network namespace and
    returns its exit status."""
    cmd = ["unshare", "--net", "--", sys.executable, "-B", "-m", "lab", module] + list(argv)
    return subprocess.run(cmd, env={**os.environ, INSIDE: "1"}).returncode


def ip_json(*args):
    out = subprocess.run(["ip", "-j", *args], check=True, stdout=subprocess.PIPE,
                         universal_newlines=True).stdout
    return json.loads(out or "[]")


def route_inside(route, family):
    dst = route.get("dst")
    if dst in (None, "default"):
        return False
    if family == "6":
        return dst in ("::1", "::1/128")
    return ipaddress.ip_network(dst, strict=False).subnet_of(ipaddress.ip_network("127.0.0.0/8"))


def verify():
    """Brings lo up; SetupError unless the namespace has only lo and only loopback
    routes. Returns the routes seen, for the results."""
    if not inside():
        raise SetupError("not inside the lab's network namespace")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    names = [link.get("ifname") for link in ip_json("link", "show")]
    if names != ["lo"]:
        raise SetupError(f"the namespace has interfaces other than lo: {', '.join(names)}; "
                         "refusing to start")
    seen = []
    for family in ("4", "6"):
        for route in ip_json(f"-{family}", "route", "show", "table", "all"):
            if not route_inside(route, family):
                raise SetupError(f"the namespace has a route beyond loopback: {route}; "
                                 "refusing to start")
            seen.append(route.get("dst"))
    return seen


def prepare(say, stack_dir, **stack):
    """The start of a run inside the namespace: verify()'d (its routes said and
    returned), and this process's environment the run's own: no STOCKD_* setting from
    outside (the stockds here are configured by the run alone), the stack's state in
    run/STACK_DIR, and the STACK_* settings given (the stack's dependencies not
    checked: the run's make target did)."""
    routes = verify()
    say(f"network namespace: only lo, routes {', '.join(routes)}")
    for k in [k for k in os.environ if k.startswith("STOCKD_")]:
        if k not in ("STOCKD_BIN", "STOCKD_RUN_DIR"):
            del os.environ[k]
    os.environ.update(STOCKD_RUN_DIR=os.path.join(run_dir(), stack_dir), STACK_SKIP_DEPS="1",
                      **stack)
    return routes


def nft(script):
    r = subprocess.run(["nft", "-f", "-"], input=script, universal_newlines=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode:
        raise SetupError(f"nft failed: {r.stdout.strip()}")


class Cuts:
    """nftables rules of this namespace between pairs of addresses, both ways: "drop"
    (packets vanish: a connection waits for its timeouts) or "reject" (a TCP reset
    answers at once: the link fails fast, as to a host known to be unreachable)."""

    def __init__(self):
        if not inside():
            raise SetupError("nftables rules only inside the lab's namespace")
        nft(f"add table ip {TABLE}\n"
            f"add chain ip {TABLE} out {{ type filter hook output priority 0; }}\n")
        self.cut = []

    def apply(self, pairs, how="drop"):
        """Cuts each (address, address) pair; the rules before are replaced."""
        # a reset the rule sends back crosses this hook too: it must pass
        verdict = "drop" if how == "drop" else "tcp flags & rst == 0 reject with tcp reset"
        rules = "".join(f"add rule ip {TABLE} out ip saddr {x} ip daddr {y} ip protocol tcp "
                        f"{verdict}\n"
                        for a, b in pairs for x, y in ((a, b), (b, a)))
        nft(f"flush chain ip {TABLE} out\n{rules}")
        self.cut = list(pairs)

    def heal(self):
        self.apply([])
