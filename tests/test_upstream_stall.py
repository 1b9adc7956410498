"""The upstream cause of the headless stall (docs/how-to/headless.md, "A headless run stalls"),
shown without mpinb, nbclient or a kernel: pyzmq's asyncio poll of a socket waits on the
socket's file descriptor, which is edge-triggered. nbclient answers every output it mirrors into
an ipywidgets ``Output`` widget with a ``comm_msg`` on the shell channel, through jupyter_client's
``Session.send``, which sends on a synchronous shadow of the asyncio socket, while another task
awaits the cell's reply on that same socket. That send clears the edge of a reply that had
already arrived, and the poll sleeps until its timeout. pyzmq's own asyncio send looks at the
socket again after sending and loses nothing.

If a jupyter_client or pyzmq stops losing the wake-up, the first test fails and says so: the
troubleshooting page's advice is then obsolete. mpinb's live view makes the client send nothing
(tests/test_headless.py runs it under jupyter execute and papermill)."""

from __future__ import annotations

import asyncio
import time

import zmq
import zmq.asyncio
from jupyter_client.session import Session

TIMEOUT = 3.0


async def reply_after_a_send(send) -> tuple[float, int]:
    """Seconds until a poll that waits for a reply returns, when the reply arrives while the
    event loop is busy and the waiting socket then sends ``send(socket)``; and whether the poll
    saw the reply (0: it timed out)."""
    ctx = zmq.asyncio.Context()
    client = ctx.socket(zmq.DEALER)
    kernel = zmq.Context.instance().socket(zmq.ROUTER)
    try:
        port = kernel.bind_to_random_port("tcp://127.0.0.1")
        client.connect(f"tcp://127.0.0.1:{port}")
        await client.send(b"execute_request")
        identity, _ = kernel.recv_multipart()

        async def poll_reply():
            started = time.monotonic()
            seen = await client.poll(int(TIMEOUT * 1000))
            return time.monotonic() - started, seen

        waiting = asyncio.ensure_future(poll_reply())
        await asyncio.sleep(0.05)  # the poll waits on the socket's descriptor
        kernel.send_multipart([identity, b"execute_reply"])
        time.sleep(0.2)  # the reply arrives while the loop runs something else (an output's handler)
        send(client)  # which answers on the same socket
        return await waiting
    finally:
        client.close(linger=0)
        kernel.close(linger=0)
        ctx.term()


def jupyter_client_send(socket) -> None:
    """What nbclient's Output widget does for each output: a comm_msg through Session.send."""
    Session(key=b"").send(socket, "comm_msg", {"comm_id": "output-widget", "data": {"method": "update"}})


def test_jupyter_client_s_send_on_the_waiting_socket_loses_the_reply_s_wake_up():
    seconds, seen = asyncio.run(reply_after_a_send(jupyter_client_send))
    assert seconds >= TIMEOUT - 0.1, (seconds, seen, "this jupyter_client and pyzmq no longer lose the wake-up")


def test_pyzmq_s_asyncio_send_keeps_it():
    seconds, seen = asyncio.run(reply_after_a_send(lambda socket: socket.send(b"comm_msg")))
    assert seen and seconds < TIMEOUT / 2, seconds
