"""The ceiling: a bare LoopDetectionService that answers ACTION_ALLOW and does nothing else.

Same contract, same grpc.aio server options and servicer shape as the daemon, so the difference
in a benchmark is loopwarden's own work. Prints `listening 127.0.0.1:PORT` on stdout.
"""
from __future__ import annotations

import asyncio
import signal
import sys

import grpc
from loopwarden.v1 import loopwarden_pb2 as pb
from loopwarden.v1 import loopwarden_pb2_grpc as pb_grpc


class EchoServicer(pb_grpc.LoopDetectionServiceServicer):
    async def Evaluate(self, request_iterator, context):
        async for request in request_iterator:
            yield pb.EvaluateResponse(verdicts=[
                pb.Verdict(seq=event.seq, run_id=event.run_id, action=pb.ACTION_ALLOW) for event in request.events])

    async def Check(self, request, context):
        event = request.event
        return pb.CheckResponse(verdict=pb.Verdict(seq=event.seq, run_id=event.run_id, action=pb.ACTION_ALLOW))

    async def InspectRun(self, request, context):
        await context.abort(grpc.StatusCode.NOT_FOUND, "the echo server holds no runs")


async def main(listen: str) -> None:
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", 8 * 1024 * 1024),
                                      ("grpc.max_send_message_length", 8 * 1024 * 1024), ("grpc.so_reuseport", 0)])
    pb_grpc.add_LoopDetectionServiceServicer_to_server(EchoServicer(), server)
    port = server.add_insecure_port(listen)
    await server.start()
    print(f"listening 127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    await server.stop(0.5)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:0"))
