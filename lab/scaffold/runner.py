"""A lab run's scaffold, written once. Every run (`python3 -m lab NAME`) has the same
shape: its flags parsed (the shared ones here: --host, --port, --results-dir), progress
lines prefixed with its name, a client carrying STOCKD_ADMIN_TOKEN, the service it needs
(the private stack and a stockd, or N instances behind nginx, started when nothing
answers, or refused when something does and the run must start its own), its work in a
guarded run (SIGTERM interrupts it like Ctrl-C; exit status 2 on a SetupError, said in
one line, 130 when interrupted; whatever happens the service stops what the run
started) and then its report, whose value is the exit status.

A runner module declares only what is its own:

    RUNNER = Runner("soak", __doc__, options=options, work=work, report=report,
                    host=True, port=True, results="soak-", instances=1)
    main, parse_args = RUNNER.main, RUNNER.parse

`options(o)` adds its flags to a lab.base.common.Options; `work(run)` does the run and
returns what `report(run, done)` prints; `run` (a Run) holds args, say, api, service,
t0, started and makes the results directory."""

import os
import signal
import sys
import time

from ..base.common import (REPO, Options, Progress, SetupError, elapsed_line, ensure_writable,
                           make_out_dir, now_iso)
from ..client.api import Api
from ..stack.service import Service
from ..reports import tables

# Where a run finds stockd: the environment variables of --host and --port, and the port.
STOCKD = (["STOCKD_HOST"], ["STOCKD_PORT", "PORT"], 8080)


def _of(value, args):
    """A declaration's value for these args: a callable is called with them."""
    return value(args) if callable(value) else value


class Run:
    """What a run's work and report are given."""

    def __init__(self, runner, args):
        self.runner, self.args = runner, args
        self.say = Progress(runner.name)
        self.t0, self.started = time.time(), now_iso()
        self.api = Api.with_admin_token(args.host, args.port) if runner.host else None
        instances = _of(runner.instances, args)
        self.service = (Service(self.api, instances, self.say, _of(runner.stockd, args) or ())
                        if instances else None)

    def elapsed(self):
        return time.time() - self.t0

    def out_dir(self):
        """results_dir/<prefix><timestamp>/, with results_dir/<prefix>latest pointing at it."""
        prefix = self.runner.results
        return make_out_dir(self.args.results_dir, prefix, prefix + "latest")


class Runner:
    """One `python3 -m lab NAME` run, declared.

    host, port      None: no such flag; True: the flag with its usual help; a string:
                    the flag with that help. A run with --host has an admin client.
    where           (host env, port env, default port) of --host and --port
    results         None: no --results-dir; else the prefix of its timestamped
                    directory ("": results/<timestamp>/, "bench-": results/bench-...)
    instances       stockd instances the run's Service keeps (int or args -> int);
                    0/None: no Service
    stockd          args -> extra stockd options of the stockd the run starts
    keep            args -> True when the stockd it started outlives the run
    own_port        why nothing may answer at --host:--port (str or args -> str/None):
                    the run refuses to start when something does
    commands        the words one of which must come first (`stream chaos ...`);
                    args.command holds it
    after_parse     (args, error) -> None: checks and derived values after parsing
    """

    def __init__(self, name, doc, *, options=None, work, report=None, host=None, port=None,
                 where=STOCKD, results=None, instances=0, stockd=None, keep=None,
                 own_port=None, commands=None, after_parse=None):
        self.name, self.doc = name, doc.split("\n\n")[0]
        self.options, self.work, self.report = options, work, report
        self.host, self.port, self.where, self.results = host, port, where, results
        self.instances, self.stockd, self.keep, self.own_port = instances, stockd, keep, own_port
        self.commands, self.after_parse = commands, after_parse

    def parse(self, argv):
        """The run's args. A missing command is a SetupError; a bad flag exits 2 (argparse)."""
        command = None
        if self.commands:
            command = argv[0] if argv and argv[0] in self.commands else None
            if not command:
                raise SetupError(f"usage: python3 -m lab {self.name} "
                                 f"{'|'.join(self.commands)} [FLAGS]")
            argv = argv[1:]
        o = Options(f"python3 -m lab {self.name}", self.doc)
        host_env, port_env, port = self.where
        if self.host:
            o.add("--host", host_env, "127.0.0.1", str,
                  "where stockd listens" if self.host is True else self.host)
        if self.port:
            o.add("--port", port_env, port, int, "its port" if self.port is True else self.port,
                  1)
        if self.results is not None:
            o.add("--results-dir", ["RESULTS_DIR"], os.path.join(REPO, "results"), str,
                  f"where results/{self.results}<timestamp>/ goes")
        if self.options:
            self.options(o)
        args = o.parse(argv)
        args.command = command
        if self.after_parse:
            self.after_parse(args, o.parser.error)
        return args

    def main(self, argv):
        """The run's exit status: its report's, or 2 when it cannot be made, 130 when
        interrupted."""
        try:
            args = self.parse(argv)
        except SetupError as e:
            print(f"{self.name}: {e}", file=sys.stderr)
            return 2
        run = Run(self, args)
        status, done = self.guarded(run)
        if status is not None:
            return status
        return self.report(run, done) if self.report else done

    def guarded(self, run):
        """(None, what work returned), or (2, None) after a SetupError, said in one line,
        or (130, None) when interrupted (SIGTERM too, so that the run's own cleanup
        happens); the service then stops what the run started, unless it is kept."""
        def on_signal(signum, frame):
            raise KeyboardInterrupt()

        signal.signal(signal.SIGTERM, on_signal)
        try:
            return None, self.work_of(run)
        except SetupError as e:
            run.say(f"error: {e}")
            return 2, None
        except KeyboardInterrupt:
            run.say("interrupted")
            return 130, None
        finally:
            if run.service:
                run.service.stop(keep=bool(self.keep and self.keep(run.args)))

    def work_of(self, run):
        """The steps every run takes before its own work."""
        if self.results is not None:
            ensure_writable(run.args.results_dir)
        why = _of(self.own_port, run.args)
        if why and run.api.answers():
            raise SetupError(f"something answers at {run.api.where()}: {why}; "
                             "choose a free --port")
        if run.service:
            run.service.ensure()
        return self.work(run)


def report_fact_rows(run, done, columns, fact, label):
    """The report of a run whose rows each hold a fact or not (failover, cluster,
    partition): the table, how many rows hold, the time and where the results went,
    then each row that does not and why. 1 when one does not, else 0."""
    rows, out_dir = done
    print(tables.text_table(rows, columns))
    bad = [r for r in rows if r["verdict"] not in ("pass", "setup")]
    unset = [r for r in rows if r["verdict"] == "setup"]
    judged = len(rows) - len(unset)
    print(f"\n{judged - len(bad)}/{judged} rows hold their {fact}"
          + (f"; {len(unset)} could not be set up, twice, and are not judged" if unset else "")
          + f"; {elapsed_line(run.elapsed())}; results in {out_dir}")
    for r in bad + unset:
        print(f"  {label(r)}: {r['reason']}")
        for line in r.get("diagnosis") or []:
            print(f"    {line}")
    return 1 if bad else 2 if unset else 0
