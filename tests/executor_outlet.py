"""An executor outlet (executor.direct.Outlet) for tests: keeps what it is given."""

from __future__ import annotations

import json
import threading
from typing import Any


class RecordingOutlet:
    def __init__(self) -> None:
        self.data = bytearray()
        self.lock = threading.Lock()

    def write(self, parts: list[bytes]) -> None:
        with self.lock:
            for part in parts:
                self.data += part

    def replies(self) -> list[dict[str, Any]]:
        with self.lock:
            lines = bytes(self.data).splitlines()
        return [json.loads(line) for line in lines if line]
