"""The bench's OpenResty-style peer (bench/openresty/): nginx with its Lua module
(Debian's nginx-extras) serving the `lua` sale through lua-resty-redis (Debian's
lua-nginx-redis) and GET /strategies from memory, one worker per core. This module
checks that Debian's packages are there, fills in bench/openresty/nginx.conf, starts
nginx as a private process of this user on 127.0.0.1 with the texts stockd runs (the
sale script read from server/*.c by lab.client.sources, its SHA1, the exact bytes of
stockd's GET /strategies) and stops it.

The peer is optional: without the packages (scripts/deps.sh openresty) start()
raises Missing with the line the bench prints before it skips its rows."""

import os
import re
import subprocess

from ..base.common import REPO, SetupError
from ..client import sources
from ..stack.service import StaticServer, nginx_binary, nginx_user

HERE = os.path.join(REPO, "bench", "openresty")
MODULES = "/usr/lib/nginx/modules"
# What the peer needs of Debian's packages: the Lua module and its kit, lua-resty-core,
# lua-resty-redis; each file and the package that brings it.
NEEDS = ((os.path.join(MODULES, "ngx_http_lua_module.so"), "nginx-extras"),
         (os.path.join(MODULES, "ndk_http_module.so"), "nginx-extras"),
         ("/usr/share/lua/5.1/resty/core.lua", "lua-resty-core"),
         ("/usr/share/lua/5.1/nginx/redis.lua", "lua-nginx-redis"))
PACKAGES = ("nginx-extras", "libnginx-mod-http-lua", "lua-nginx-redis")


class Missing(Exception):
    """The OpenResty peer cannot run here; the message says why and what to do."""


def describe():
    """The Debian versions of the peer's packages, in words."""
    words = []
    for p in PACKAGES:
        try:
            v = subprocess.run(["dpkg-query", "-W", "-f=${Version}", p], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               universal_newlines=True, timeout=30).stdout.strip()
        except OSError:
            v = ""
        words.append(f"{p} {v or 'not installed'}")
    return ", ".join(words)


def check_installed():
    """Missing, naming the packages, when a file the peer needs is not there."""
    try:
        nginx_binary()
    except SetupError:
        raise Missing("nginx is not installed (scripts/deps.sh openresty)") from None
    absent = sorted({pkg for path, pkg in NEEDS if not os.path.exists(path)})
    if absent:
        raise Missing(f"{', '.join(absent)} not installed: the OpenResty peer needs Debian's "
                      "nginx-extras and lua-nginx-redis (scripts/deps.sh openresty)")


class OpenResty(StaticServer):
    """The peer on 127.0.0.1:port: its files under `directory`, GET /strategies
    answering `static`'s bytes, the `lua` sale on the stack's Redis (`db`: the stack's
    STOCKD_* settings), `pool` keepalive connections per worker."""

    what, knob = "the OpenResty peer", "--openresty-port / BENCH_OPENRESTY_PORT"

    def __init__(self, directory, port, db, static, pool):
        super().__init__(directory, port, "/strategies", static)
        script = sources.redis_script(sources.SALE_SCRIPT_FILE, sources.SALE_SCRIPT)
        self.lua_name = sources.strategy_name(sources.LUA_FILE)
        self.env = dict(os.environ)
        self.env.update(PEER_REDIS_HOST=db["STOCKD_REDIS_HOST"],
                        PEER_REDIS_PORT=db["STOCKD_REDIS_PORT"],
                        PEER_REDIS_PASSWORD_FILE=db.get("STOCKD_REDIS_PASSWORD_FILE", ""),
                        PEER_SALE_SCRIPT=script, PEER_SALE_SHA=sources.sha1(script),
                        PEER_LUA_NAME=self.lua_name, PEER_POOL=str(pool))

    def config(self, static_file):
        self.env["PEER_STATIC_FILE"] = static_file
        with open(os.path.join(HERE, "nginx.conf")) as f:
            text = f.read()
        for name, value in (("USER", nginx_user()), ("DIR", self.dir), ("MODULES", MODULES),
                            ("HERE", HERE), ("PORT", str(self.port)),
                            ("LUA_NAME", self.lua_name)):
            text = text.replace(f"@{name}@", value)
        assert not re.search(r"@[A-Z_]+@", text), "a name of bench/openresty/nginx.conf unfilled"
        return text

    def start(self, api_factory):
        check_installed()
        super().start(api_factory)
