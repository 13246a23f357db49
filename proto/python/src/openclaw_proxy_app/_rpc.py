"""The generated gRPC stubs behind typed names: grpcio-tools writes untyped
Python, so the two services' calls are given their message types here."""

from __future__ import annotations

import grpc.aio

from ._proto import proxy_pb2 as pb
from ._proto import proxy_pb2_grpc as generated


class Stubs:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        sessions = generated.SessionServiceStub(channel)  # type: ignore[no-untyped-call]
        bridge = generated.BridgeServiceStub(channel)  # type: ignore[no-untyped-call]
        self.create_session: grpc.aio.UnaryUnaryMultiCallable[
            pb.CreateSessionRequest, pb.CreateSessionResponse] = sessions.CreateSession
        self.delete_session: grpc.aio.UnaryUnaryMultiCallable[
            pb.DeleteSessionRequest, pb.DeleteSessionResponse] = sessions.DeleteSession
        self.attach: grpc.aio.StreamStreamMultiCallable[
            pb.AppMessage, pb.ProxyMessage] = bridge.Attach
