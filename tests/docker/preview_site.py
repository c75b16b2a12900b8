"""A dev-server-like app for preview tests, run INSIDE a workspace container
with the image's python3 (standard library only): a page whose script
opens a WebSocket back to the same host, and a WebSocket echo that says
which Host it was asked for (and keeps in /tmp/browser-report what the page
reports). Written to the sandbox and started through the process API.

    python3 preview_site.py HOST PORT
"""

import base64
import hashlib
import json
import socket
import struct
import sys
import threading

PAGE = """<!doctype html><html><head><title>sandbox page</title></head><body>
<h1 id="title">served from inside the sandbox</h1><p id="ws">connecting</p>
<script>
const here = new URL(location.href);
const ws = new WebSocket((here.protocol === "https:" ? "wss://" : "ws://") + here.host +
                         here.pathname.replace(/[^/]*$/, "") + "ws");
ws.onmessage = (e) => {
  const seen = JSON.parse(e.data);
  if (!seen.host) return;
  const text = "websocket ok, host " + seen.host +
               (seen.host === here.host ? " (same as the page)" : "");
  document.getElementById("ws").textContent = text;
  // What the browser shows, told back to the server (a test reads it there).
  ws.send("report:" + document.getElementById("title").textContent + " | " + text);
};
ws.onerror = () => { document.getElementById("ws").textContent = "websocket failed"; };
</script></body></html>"""
MAGIC = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def head(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return None, {}
        data += chunk
    lines = data.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0].split(" ")[1], headers


def frame(text):
    payload = text.encode()
    if len(payload) < 126:
        return bytes([0x81, len(payload)]) + payload
    return bytes([0x81, 126]) + struct.pack("!H", len(payload)) + payload


def read_frame(conn):
    first = conn.recv(2, socket.MSG_WAITALL)
    if len(first) < 2:
        return None
    opcode, size = first[0] & 0x0F, first[1] & 0x7F
    if size == 126:
        size = struct.unpack("!H", conn.recv(2, socket.MSG_WAITALL))[0]
    elif size == 127:
        size = struct.unpack("!Q", conn.recv(8, socket.MSG_WAITALL))[0]
    mask = conn.recv(4, socket.MSG_WAITALL)
    data = bytearray(conn.recv(size, socket.MSG_WAITALL) if size else b"")
    for i in range(len(data)):
        data[i] ^= mask[i % 4]
    return None if opcode == 8 else bytes(data).decode()


def serve(conn):
    path, headers = head(conn)
    if path is None:
        conn.close()
        return
    if headers.get("upgrade", "").lower() == "websocket":
        accept = base64.b64encode(
            hashlib.sha1((headers["sec-websocket-key"] + MAGIC).encode()).digest()
        ).decode()
        conn.sendall(
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            ).encode()
        )
        conn.sendall(frame(json.dumps({"host": headers.get("host")})))
        while (message := read_frame(conn)) is not None:
            if message.startswith("report:"):
                with open("/tmp/browser-report", "w") as report:
                    report.write(message[len("report:") :])
            conn.sendall(frame("echo:" + message))
        conn.close()
        return
    body = PAGE.encode()
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n"
        b"Connection: close\r\n\r\n%s" % (len(body), body)
    )
    conn.close()


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    server = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, port))
    server.listen(64)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
