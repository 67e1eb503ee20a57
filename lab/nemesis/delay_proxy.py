"""A link with a delay you can set: a TCP proxy (asyncio, in a thread of its own) that
passes a client's bytes to its server at once and holds the server's replies for
`delay_ms` before passing them on, in order. `tc netem` would do it in the kernel;
this kernel has no netem, and a proxy on one link delays that link only: one stockd's
connection to one Redis server, while the others stay direct.

    proxy = DelayProxy(("127.0.0.20", 6379), ("127.0.0.10", 6379), source="127.0.0.20")
    proxy.start(); proxy.delay_ms = 1500; ...; proxy.stop()

Its connection to the server comes from `source`, so a cut between addresses sees
it as the proxy's own address."""

import asyncio
import threading

from ..base.common import SetupError


class DelayProxy:
    def __init__(self, listen, upstream, source):
        self.listen, self.upstream, self.source = listen, upstream, source
        self.delay_ms = 0
        self.loop = self.server = self.thread = None
        self.ready = threading.Event()
        self.error = None
        self.links = {}  # each link's task -> its two writers
        self.linked = threading.Event()  # set by the first client's connection

    def start(self):
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        self.ready.wait(5)
        if self.error or not self.server:
            raise SetupError(f"the delay proxy on {self.listen[0]}:{self.listen[1]} did not "
                             f"start: {self.error or 'no answer within 5 s'}")

    def run(self):
        self.loop = asyncio.new_event_loop()
        try:
            self.server = self.loop.run_until_complete(
                asyncio.start_server(self.serve, *self.listen))
        except OSError as e:
            self.error = str(e)
        self.ready.set()
        if self.server:
            self.loop.run_forever()
        self.loop.close()

    async def serve(self, client_r, client_w):
        self.linked.set()
        try:
            server_r, server_w = await asyncio.open_connection(
                *self.upstream, local_addr=(self.source, 0))
        except OSError:
            client_w.close()
            return
        me = asyncio.current_task()
        self.links[me] = (client_w, server_w)
        await asyncio.gather(self.pipe(client_r, server_w, delayed=False),
                             self.pipe(server_r, client_w, delayed=True),
                             return_exceptions=True)
        del self.links[me]

    async def pipe(self, reader, writer, delayed):
        """Copies until EOF; a delayed pipe holds each chunk it reads for delay_ms (a
        reply that follows one being held waits behind it: the order is kept)."""
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if delayed and self.delay_ms:
                    await asyncio.sleep(self.delay_ms / 1000)
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def shutdown(self):
        """Closes the listener and every link it carries, and waits for them to end."""
        self.server.close()
        for writers in self.links.values():
            for w in writers:
                w.close()
        if self.links:
            await asyncio.wait(list(self.links), timeout=5)

    def stop(self):
        if self.loop and self.server:
            asyncio.run_coroutine_threadsafe(self.shutdown(), self.loop).result(5)
            self.loop.call_soon_threadsafe(self.loop.stop)
        if self.thread:
            self.thread.join(5)

