"""What the runs drive, brought up when it is not there: the private stack
(scripts/stack.sh up), one build/stockd in the background, or N instances behind the
stack's nginx (scripts/stack.sh instances-up N); and a private nginx that serves one
static file (the bench's HTTP-path limit). Everything started here is stopped by
stop() unless it is asked to keep it (make demo leaves its stockd for the live page);
the stack itself is left running. The one stockd runs in the run directory with its
pid in run/stockd.pid: that is how scripts/stack.sh down knows it as its own."""

import os
import shlex
import signal
import subprocess
import sys
import time

from ..base.common import REPO, SetupError, tail
from ..base.waiting import wait_until

LOCAL = ("127.0.0.1", "localhost", "::1")


def stack_script():
    stack = os.path.join(REPO, "scripts", "stack.sh")
    if not os.access(stack, os.X_OK):
        raise SetupError(f"{stack} is missing: cannot start the stack")
    return stack


def stack_env(verb="env"):
    """The NAME=VALUE settings `scripts/stack.sh VERB` gives stockd (`env`: the main
    stack; `ha-env`: the replicated Redis group). Its REDISCLI_AUTH, the stack's Redis
    password, goes into this process's environment too, so that every redis-cli the lab
    runs gives it (by the environment, not the command line)."""
    out = subprocess.run([stack_script(), verb], check=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    env = {}
    for line in out.splitlines():
        words = shlex.split(line)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            k, v = words[1].split("=", 1)
            env[k] = v
    if env.get("REDISCLI_AUTH"):
        os.environ["REDISCLI_AUTH"] = env["REDISCLI_AUTH"]
    return env


# The stack's Galera cluster: its nodes are its services cluster-1, cluster-2, ...
CLUSTER_SERVICE = "cluster"


def stack(*words, env=None, check=True):
    """scripts/stack.sh WORDS..., its progress on stderr; its stdout returned."""
    r = subprocess.run([stack_script(), *words], env={**os.environ, **(env or {})},
                       stdout=subprocess.PIPE, stderr=sys.stderr, universal_newlines=True)
    if check and r.returncode:
        raise SetupError(f"scripts/stack.sh {' '.join(words)} failed")
    return r.stdout


def node_names():
    """The names of the stack's Galera nodes (scripts/stack.sh status): at least two."""
    names = [line.split()[0] for line in stack("status", check=False).splitlines()
             if line.startswith(CLUSTER_SERVICE + "-")]
    if len(names) < 2:
        raise SetupError("the stack runs fewer than two cluster nodes")
    return names


def secret(env, name):
    """The password in the file that env's NAME (STOCKD_*_PASSWORD_FILE) names."""
    with open(env[name]) as f:
        return f.readline().rstrip("\r\n")


def run_dir():
    return os.environ.get("STOCKD_RUN_DIR") or os.path.join(REPO, "run")


def stockd_binary():
    """build/stockd, or $STOCKD_BIN; None when it is not there to run."""
    path = os.environ.get("STOCKD_BIN") or os.path.join(REPO, "build", "stockd")
    return path if os.access(path, os.X_OK) else None


def launch_stockd(port, options, env, log_file, cwd=None):
    """Starts a stockd on 127.0.0.1-or-`--listen` `port` with `options` and `env`, its
    output appended to `log_file`; returns the process (not yet known healthy)."""
    binary = stockd_binary()
    if binary is None:
        raise SetupError("build/stockd does not exist: build it first (make)")
    cmd = [os.path.realpath(binary), f"--port={port}"] + list(options)
    with open(log_file, "ab") as log:
        return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)


def wait_healthy(api, seconds, proc=None, log_file=None):
    """Returns once `api` answers /health; SetupError, with the log's tail, when `proc`
    (the stockd started, if any) exits first or `seconds` pass."""
    def healthy():
        if api.healthy():
            return True
        if proc is not None and proc.poll() is not None:
            raise SetupError(f"stockd exited with status {proc.returncode} during start; "
                             f"see {log_file}:\n{tail(log_file)}")
        return False

    if not wait_until(seconds, healthy, 0.1):
        raise SetupError(f"stockd at {api.where()} not healthy after {seconds}s"
                         + (f"; see {log_file}:\n{tail(log_file)}" if proc else ""))


class Service:
    """Makes sure a stockd (or `instances` of them behind a balancer) answers at
    api's host:port; starts them, and the stack, when nothing answers there.
    `options`: more command-line options for a stockd it starts itself."""

    def __init__(self, api, instances, say, options=()):
        self.api, self.instances, self.say = api, instances, say
        self.options = list(options)
        self.proc = None
        self.pid_file = os.path.join(run_dir(), "stockd.pid")
        self.log_file = os.path.join(run_dir(), "stockd.log")
        self.instances_started = False

    def local(self):
        return self.api.host in LOCAL or self.api.host.startswith("127.")

    def ensure(self):
        where = self.api.where()
        if self.instances > 1 and self.local() and self.api.answers():
            self.stop_kept_stockd()
        if self.api.answers():
            if self.api.healthy():
                self.say(f"stockd answers at {where}")
                return
            if self.local():
                self.say(f"stockd at {where} is not healthy: bringing the stack up")
                self.stack_up()
            self.wait_healthy(30, None)
            return
        if not self.local():
            raise SetupError(f"nothing answers at {where} and it is not a local address")
        if self.instances > 1:
            self.start_instances()
        else:
            self.binary()  # fail before starting anything when there is nothing to run
            self.stack_up()
            self.start_stockd()

    def kept_stockd(self):
        """The pid of the one stockd a run kept on our port (make demo keeps it for the
        live page; its pid is in run/stockd.pid), if it is alive; else None."""
        try:
            with open(self.pid_file) as f:
                pid = int(f.read().strip())
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError):
            return None
        mine = os.path.basename(argv[0]) == b"stockd" and \
            f"--port={self.api.port}".encode() in argv
        return pid if mine else None

    def stop_kept_stockd(self):
        """N instances are to answer where the one stockd make demo left running
        answers: stop that one first (make demo or make run starts it again)."""
        pid = self.kept_stockd()
        if pid is None:
            return
        self.say(f"stopping the stockd a run left on {self.api.where()} (pid {pid}) to put "
                 f"{self.instances} instances there; make demo or make run starts it again")
        os.kill(pid, signal.SIGTERM)
        deadline = time.time() + 15
        while os.path.exists(f"/proc/{pid}") and time.time() < deadline:
            time.sleep(0.1)
        if os.path.exists(f"/proc/{pid}"):
            raise SetupError(f"the stockd left running (pid {pid}) did not stop within 15 s")
        try:
            os.unlink(self.pid_file)
        except OSError:
            pass

    def binary(self):
        path = stockd_binary()
        if path is None:
            raise SetupError(f"nothing answers at {self.api.where()} and build/stockd does "
                             "not exist: build it first (make)")
        return path

    def instances_env(self):
        """stack.sh's environment for the balanced run: nginx listens on our port."""
        port, n = self.api.port, self.instances
        env = dict(os.environ, STACK_NGINX_PORT=str(port))
        base = env.get("STACK_STOCKD_PORT_BASE") or "23091"
        try:
            base = int(base)
        except ValueError:
            raise SetupError(f"STACK_STOCKD_PORT_BASE is not a port number: {base!r}") from None
        if base <= port < base + n:
            raise SetupError(f"--port {port} is one of the instance ports {base}..{base + n - 1} "
                             "(set STACK_STOCKD_PORT_BASE elsewhere)")
        return env

    def scrape_targets(self):
        """Where Prometheus reaches each stockd this run drives: the one at host:port,
        or the N instances behind the balancer there."""
        if self.instances <= 1:
            return [self.api.where()]
        base = int(self.instances_env().get("STACK_STOCKD_PORT_BASE") or 23091)
        return [f"127.0.0.1:{base + i}" for i in range(self.instances)]

    def start_instances(self):
        """N stockd instances on their own ports behind a private nginx on host:port
        (round-robin, keep-alive, never retrying a request on another instance)."""
        n = self.instances
        if self.api.host not in ("127.0.0.1", "localhost"):
            raise SetupError(f"--instances {n}: nothing answers at {self.api.where()}; the "
                             "private balancer listens on 127.0.0.1 only: use --host 127.0.0.1, "
                             "or start the instances and their balancer at that address first")
        self.binary()
        env = self.instances_env()
        self.stack_up()
        self.say(f"scripts/stack.sh instances-up {n} (nginx on 127.0.0.1:{self.api.port})")
        self.instances_started = True  # also after a partial start: stop() cleans up
        r = subprocess.run([stack_script(), "instances-up", str(n)], env=env,
                           stdout=sys.stderr, stderr=sys.stderr)
        if r.returncode != 0:
            raise SetupError(f"scripts/stack.sh instances-up {n} failed (exit {r.returncode}); "
                             "logs in $STOCKD_RUN_DIR/stack/")
        self.wait_healthy(30, None)

    @property
    def started(self):
        """Whether this run started stockd (one, or instances behind nginx)."""
        return self.proc is not None or self.instances_started

    def stack_up(self):
        self.say("scripts/stack.sh up")
        r = subprocess.run([stack_script(), "up"], stdout=sys.stderr, stderr=sys.stderr)
        if r.returncode != 0:
            raise SetupError(f"scripts/stack.sh up failed (exit {r.returncode})")

    def start_stockd(self):
        binary = self.binary()
        os.makedirs(run_dir(), exist_ok=True)
        listen = "127.0.0.1" if self.api.host == "localhost" else self.api.host
        options = [f"--listen={listen}"] + self.options
        self.say(f"starting {binary} --port={self.api.port} {' '.join(options)} "
                 f"(log {self.log_file})")
        self.proc = launch_stockd(self.api.port, options, {**os.environ, **stack_env()},
                                  self.log_file, cwd=os.path.realpath(run_dir()))
        with open(self.pid_file, "w") as f:
            f.write(f"{self.proc.pid}\n")
        self.wait_healthy(30, self.proc)

    def own_memory_kib(self, field):
        """A /proc/<pid>/status figure (VmRSS: resident now, VmHWM: peak) of the one
        stockd this run started, in KiB; None when it did not start one."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith(field + ":"):
                        return int(line.split()[1])
        except OSError:
            return None
        return None

    def memory_source(self):
        """Where memory() reads: /proc for the stockd this run started, else /metrics."""
        return "/proc" if self.own_memory_kib("VmRSS") is not None else "/metrics"

    def memory(self):
        """(total resident KiB, {instance: KiB}): from /proc for the stockd this run
        started, else from each instance's /metrics."""
        own = self.own_memory_kib("VmRSS")
        if own is not None:
            return own, {}
        by = self.api.memory_by_instance(self.instances)
        return (sum(by.values()) if by else None), by

    def wait_healthy(self, seconds, proc):
        wait_healthy(self.api, seconds, proc, self.log_file)
        self.say(f"stockd healthy at {self.api.where()}")

    def stop(self, keep=False):
        """Stops what this run started; with `keep`, leaves it running (scripts/stack.sh
        down stops it: the instances and nginx by their pid files in the stack, the one
        stockd by run/stockd.pid)."""
        if keep:
            return
        if self.instances_started:
            self.instances_started = False
            self.say("scripts/stack.sh instances-down (the instances and nginx we started)")
            try:
                subprocess.run([stack_script(), "instances-down"], env=self.instances_env(),
                               stdout=sys.stderr, stderr=sys.stderr)
            except (OSError, SetupError) as e:
                self.say(f"stopping the instances failed: {e}")
        if not self.proc:
            return
        if self.proc.poll() is None:
            self.say(f"stopping the stockd we started (pid {self.proc.pid})")
            stop_process(self.proc)
        try:
            with open(self.pid_file) as f:
                if f.read().strip() == str(self.proc.pid):
                    os.unlink(self.pid_file)
        except OSError:
            pass
        self.proc = None


def stop_process(proc, grace=10):
    """TERM, then KILL after `grace` seconds: only ever this process."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


NGINX_STATIC = """# written by the lab: a private nginx serving one static file (HTTP-path limit)
{user}daemon off;
master_process on;
worker_processes auto;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    server_tokens off;
    keepalive_requests 1000000;
    client_body_temp_path {dir}/tmp/client_body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    server {{
        listen 127.0.0.1:{port};
        location = {path} {{
            default_type application/json;
            alias {dir}/{file};
        }}{fixed}
    }}
}}
"""
# A fixed answer of the private nginx, from its config alone (no file, no module).
NGINX_FIXED = """
        location = {path} {{
            default_type application/json;
            return {status} '{body}';
        }}"""


def nginx_binary():
    for c in ("/usr/sbin/nginx", "/usr/bin/nginx"):
        if os.access(c, os.X_OK):
            return c
    raise SetupError("nginx not found (scripts/deps.sh bench)")


def nginx_user():
    """The `user` line of a private nginx: a master started by root switches its
    workers to `user` (default nobody, who may not read the run directory, e.g.
    in a checkout under a 0700 directory); as anyone else `user` is ignored with a
    warning, so it is only written for root."""
    return "user root;\n" if os.geteuid() == 0 else ""


class StaticServer:
    """A private nginx (this user's process, on 127.0.0.1:port, everything under
    `directory`) answering GET `path` with `content`'s exact bytes, and with `fixed`
    ((path, status, body)) that status and body at that path, from its config alone. A
    subclass serves more by writing another config() and environment (env)."""

    what, knob = "the private nginx", "--http-port / BENCH_HTTP_PORT"
    env = None  # the environment nginx starts with (None: this process's)

    def __init__(self, directory, port, path, content, fixed=None):
        self.dir, self.port, self.path = os.path.abspath(directory), port, path
        self.content, self.fixed = content, fixed
        self.proc = None

    def config(self, static_file):
        """nginx.conf's text, `static_file` being the content's file in the directory."""
        fixed = ""
        if self.fixed:
            path, status, body = self.fixed
            if any(c in body for c in "'\\$"):
                raise SetupError(f"a fixed answer nginx would have to unquote: {body[:80]}")
            fixed = NGINX_FIXED.format(path=path, status=status, body=body)
        return NGINX_STATIC.format(dir=self.dir, port=self.port, path=self.path,
                                   file=os.path.basename(static_file), user=nginx_user(),
                                   fixed=fixed)

    def start(self, api_factory):
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        static = os.path.join(self.dir, "static")
        with open(static, "wb") as f:
            f.write(self.content)
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(self.config(static))
        probe = api_factory(self.port)
        if probe.answers():
            raise SetupError(f"port {self.port} is taken: {self.what} needs it ({self.knob})")
        cmd = [nginx_binary(), "-p", self.dir + "/", "-e", os.path.join(self.dir, "error.log"),
               "-c", conf]
        with open(os.path.join(self.dir, "console.log"), "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         env=self.env)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                r = probe.call("GET", self.path, timeout=2)
                if r.status == 200 and r.raw == self.content:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise SetupError(f"{self.what} did not serve {self.path} on port {self.port}; "
                         f"see {self.dir}/error.log")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            stop_process(self.proc)
        self.proc = None
