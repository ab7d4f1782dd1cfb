"""uvicorn's httptools protocol, answering a request line it cannot take with a Status that says
what the limit is, instead of ``400 Invalid HTTP request received.`` in plain text.

httptools parses URLs of at most 65,535 bytes (its offsets are 16-bit); a WebSocket upgrade (an
exec's) is parsed again by ``websockets`` up to ``MAX_REQUEST_LINE_BYTES``. kubectl retries a
refused upgrade over SPDY, so for an exec command over 1 MiB this answer is the one it prints.
"""

from __future__ import annotations

import json

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from airflow_provider_training.embedded.apiserver.limits import MAX_REQUEST_LINE_BYTES

MAX_URL_BYTES = 65_535


class HttpProtocol(HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:
        if len(self.url) <= MAX_URL_BYTES:
            super().send_400_response(msg)
            return
        message = (
            f"the request's URL is {len(self.url)} bytes: this API server reads URLs of at most {MAX_URL_BYTES} "
            f"bytes ({MAX_REQUEST_LINE_BYTES} for the WebSocket upgrade of kubectl exec); for a long command, "
            "pass its input on stdin (kubectl exec -i POD -- sh -s < script)"
        )
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "RequestURITooLong",
            "code": 414,
        }
        body = json.dumps(status).encode()
        head = (
            "HTTP/1.1 414 Request-URI Too Long\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.transport.close()
