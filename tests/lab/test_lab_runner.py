"""lab.scaffold.runner, the scaffold every run shares, driven as `python3 -m lab` drives it: the
shared flags and their environment variables, the exit statuses (2 in one line when a
run cannot be made, 130 when SIGTERM interrupts it, the report's otherwise), the refusal
of a port where something answers, the admin token on the run's client, and the results
directory it makes."""

import contextlib
import os
import signal
import tempfile
import unittest

from fakestockd import FakeStockd, document, strategy
from lab.base.common import SetupError
from lab.scaffold.runner import Runner
from lab.runs import probe, stream
from test_lab_api import run_main

DOC = document([strategy("alpha")])


def runner(work, **declared):
    return Runner("try", "A run for the tests.", work=work, **declared)


class ParseTest(unittest.TestCase):
    def test_shared_flags_read_their_environment(self):
        r = runner(lambda run: 0, host=True, port=True, results="try-")
        old = {k: os.environ.get(k) for k in ("STOCKD_HOST", "STOCKD_PORT", "PORT")}
        try:
            os.environ.update({"STOCKD_HOST": "10.0.0.9", "PORT": "9001"})
            os.environ.pop("STOCKD_PORT", None)
            args = r.parse([])
            self.assertEqual((args.host, args.port), ("10.0.0.9", 9001))
            self.assertEqual(r.parse(["--port", "9002"]).port, 9002)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.assertTrue(args.results_dir.endswith("results"))

    def test_undeclared_flags_are_refused(self):
        with self.assertRaises(SystemExit) as e, open(os.devnull, "w") as null, \
                contextlib.redirect_stderr(null):
            runner(lambda run: 0).parse(["--port", "1"])
        self.assertEqual(e.exception.code, 2)

    def test_a_run_with_commands_needs_one(self):
        status, err = run_main(stream.main, ["--port", "1"])
        self.assertEqual(status, 2)
        self.assertIn("usage: python3 -m lab stream reconcile|chaos|bench", err)
        self.assertEqual(stream.parse_args(["bench", "--conns", "3"]).command, "bench")


class StatusTest(unittest.TestCase):
    def test_the_report_gives_the_status(self):
        r = runner(lambda run: ["row"], report=lambda run, done: 7 if done == ["row"] else 0)
        self.assertEqual(run_main(r.main, [])[0], 7)

    def test_a_setup_error_is_exit_2_in_one_line(self):
        def work(run):
            raise SetupError("no such backend")
        status, err = run_main(runner(work).main, [])
        self.assertEqual(status, 2)
        self.assertEqual(err, "try: error: no such backend\n")

    def test_sigterm_interrupts_the_work_and_its_cleanup_runs(self):
        cleaned = []

        def work(run):
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                return "not interrupted"
            finally:
                cleaned.append(True)

        old = signal.getsignal(signal.SIGTERM)
        try:
            status, err = run_main(runner(work).main, [])
        finally:
            signal.signal(signal.SIGTERM, old)
        self.assertEqual(status, 130)
        self.assertEqual(err, "try: interrupted\n")
        self.assertEqual(cleaned, [True])


class ServiceTest(unittest.TestCase):
    def test_refuses_a_port_where_something_answers(self):
        with FakeStockd(DOC) as fake:
            status, err = run_main(probe.main, ["--port", str(fake.port)])
        self.assertEqual(status, 2)
        self.assertIn(f"something answers at 127.0.0.1:{fake.port}: the probe starts its own "
                      "instances behind nginx there; choose a free --port", err)

    def test_the_client_carries_the_admin_token(self):
        def work(run):
            return run.api.reset(1001, 10)
        r = runner(work, report=lambda run, error: 1 if error else 0, host=True, port=True,
                   instances=1)
        with FakeStockd(DOC, token="s3cret") as fake:
            status, _ = run_main(r.main, ["--port", str(fake.port)],
                                 env={"STOCKD_ADMIN_TOKEN": "s3cret"})
            self.assertEqual(status, 0)
            self.assertEqual(fake.resets, ["Bearer s3cret"])

    def test_results_directory_made_under_results_dir(self):
        with tempfile.TemporaryDirectory() as d:
            r = runner(lambda run: run.out_dir(), report=lambda run, out: out, results="try-")
            status, _ = run_main(r.main, ["--results-dir", d])
            self.assertTrue(os.path.isdir(status))
            self.assertEqual(os.path.realpath(os.path.join(d, "try-latest")), status)
            self.assertTrue(os.path.basename(status).startswith("try-"))

    def test_unwritable_results_dir_is_exit_2_before_the_work(self):
        ran = []
        with tempfile.NamedTemporaryFile() as f:
            r = runner(lambda run: ran.append(1), results="try-")
            status, err = run_main(r.main, ["--results-dir", f.name + "/results"])
        self.assertEqual(status, 2)
        self.assertIn("cannot write results under", err)
        self.assertEqual(ran, [])


if __name__ == "__main__":
    unittest.main()
