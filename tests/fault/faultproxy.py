"""faultproxy.py - a TCP proxy that makes a link slow: every chunk read from either side is
written to the other side delay_ms after it arrived (order kept). This kernel has no netem
(tc qdisc netem is refused), so a slow link is made here.

    faultproxy.py LISTEN_ADDR LISTEN_PORT TARGET_ADDR TARGET_PORT CONTROL_FILE

CONTROL_FILE holds the delay in milliseconds (a number; 0 or a missing file: none); the proxy
reads it every 20 ms, so the harness changes the delay by writing the file (atomically).
"""
import asyncio
import os
import sys

DELAY = [0.0]


async def watch(path):
    while True:
        try:
            with open(path) as f:
                DELAY[0] = max(0.0, float(f.read().strip() or 0) / 1000)
        except (OSError, ValueError):
            DELAY[0] = 0.0
        await asyncio.sleep(0.02)


async def pump(reader, writer):
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def send():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
    sender = asyncio.ensure_future(send())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            await queue.put((loop.time() + DELAY[0], data))
    except (ConnectionError, OSError):
        pass
    await queue.put((0, None))
    try:
        await sender
        writer.close()
    except (ConnectionError, OSError):
        pass


async def main():
    laddr, lport, taddr, tport, control = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
        int(sys.argv[4]), sys.argv[5]

    async def handle(cr, cw):
        try:
            sr, sw = await asyncio.open_connection(taddr, tport)
        except OSError:
            cw.close()
            return
        await asyncio.gather(pump(cr, sw), pump(sr, cw))
    server = await asyncio.start_server(handle, laddr, lport, reuse_address=True)
    asyncio.ensure_future(watch(control))
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    os.nice(0)
    asyncio.run(main())
