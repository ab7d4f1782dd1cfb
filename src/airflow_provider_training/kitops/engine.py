"""Run the same operations through a real ``kit`` binary (``engine="kit"``).

Never through a shell: argv lists only, ``--progress none``, passwords on stdin (``--password-stdin``),
JSON output parsed. The binary comes from the ``AIRFLOW_TRAINING_KIT_BINARY`` setting (environment;
the Airflow layer maps ``[training] kit_binary`` onto it), else ``kit`` on ``PATH``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KIT_BINARY_SETTING = "AIRFLOW_TRAINING_KIT_BINARY"
_DIGEST = re.compile(r"sha256:[a-f0-9]{64}")


class KitEngineError(RuntimeError):
    pass


@dataclass
class KitEngine:
    binary: str | None = None
    home: Path | None = None  # KITOPS_HOME for the child; default: inherited
    timeout: float = 3600.0

    def resolve_binary(self) -> str:
        wanted = self.binary or os.environ.get(KIT_BINARY_SETTING) or "kit"
        found = shutil.which(wanted)
        if not found:
            raise KitEngineError(
                f"the kit binary {wanted!r} was not found; install kit (https://kitops.org) or set "
                f"{KIT_BINARY_SETTING} (Airflow: [training] kit_binary) to its path, or use engine='native'"
            )
        return found

    def run(self, args: Sequence[str], stdin: str | None = None) -> str:
        argv = [self.resolve_binary(), *args]
        env = dict(os.environ)
        if self.home:
            env["KITOPS_HOME"] = str(self.home)
        proc = subprocess.run(
            argv,
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            env=env,
            timeout=self.timeout,
            check=False,
        )
        if proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip().replace("[ERROR] ", "")
            raise KitEngineError(f"kit {args[0]} failed (exit {proc.returncode}): {msg[-2000:]}")
        return proc.stdout

    @staticmethod
    def _net(plain_http: bool, tls_verify: bool) -> list[str]:
        out = []
        if plain_http:
            out.append("--plain-http")
        if not tls_verify:
            out.append("--tls-verify=false")
        return out

    def pack(
        self,
        directory: str | Path,
        reference: str,
        kitfile: str | Path | None = None,
        compression: str = "none",
        modelpack: bool = False,
        layer_format: str = "tar",
    ) -> str:
        args = ["pack", str(directory), "-t", reference, "--compression", compression, "--progress", "none"]
        if modelpack:
            args.append("--use-model-pack")
        if layer_format != "tar":
            args += ["--layer-format", layer_format]
        stdin = None
        if kitfile is not None:
            text = str(kitfile)
            if "\n" in text:
                args += ["-f", "-"]
                stdin = text
            else:
                args += ["-f", text]
        out = self.run(args, stdin)
        return self._digest(out, "pack")

    def push(self, reference: str, plain_http: bool = False, tls_verify: bool = True) -> str:
        out = self.run(["push", reference, "--progress", "none", *self._net(plain_http, tls_verify)])
        return self._digest(out, "push")

    def pull(self, reference: str, plain_http: bool = False, tls_verify: bool = True) -> str:
        return self.run(["pull", reference, "--progress", "none", *self._net(plain_http, tls_verify)])

    def unpack(
        self,
        reference: str,
        directory: str | Path,
        filters: Sequence[str] = (),
        plain_http: bool = False,
        tls_verify: bool = True,
    ) -> None:
        args = [
            "unpack",
            reference,
            "-d",
            str(directory),
            "--progress",
            "none",
            *self._net(plain_http, tls_verify),
        ]
        for f in filters:
            args += ["--filter", f]
        self.run(args)

    def inspect(
        self, reference: str, remote: bool = False, plain_http: bool = False, tls_verify: bool = True
    ) -> dict[str, Any]:
        args = ["inspect", reference, "--progress", "none"]
        if remote:
            args += ["--remote", *self._net(plain_http, tls_verify)]
        out = self.run(args)
        try:
            data: dict[str, Any] = json.loads(out)
        except json.JSONDecodeError as exc:
            raise KitEngineError(f"kit inspect printed something that is not JSON: {out[:200]!r}") from exc
        return data

    def login(
        self, registry: str, username: str, password: str, plain_http: bool = False, tls_verify: bool = True
    ) -> None:
        self.run(
            [
                "login",
                registry,
                "-u",
                username,
                "--password-stdin",
                "--progress",
                "none",
                *self._net(plain_http, tls_verify),
            ],
            stdin=password,
        )

    def list(self) -> list[dict[str, Any]]:
        out = self.run(["list", "--format", "json", "--progress", "none"])
        start = min((i for i in (out.find("["), out.find("{")) if i >= 0), default=-1)
        if start < 0:
            return []
        try:  # kit prints one indented JSON array; older builds printed one object per line
            data = json.loads(out[start:])
        except json.JSONDecodeError:
            rows: list[dict[str, Any]] = []
            for line in out.splitlines():
                if line.strip().startswith("{"):
                    rows.append(json.loads(line))
            return rows
        return data if isinstance(data, list) else [data]

    @staticmethod
    def _digest(out: str, what: str) -> str:
        m = _DIGEST.findall(out)
        if not m:
            raise KitEngineError(f"kit {what} did not print a digest: {out[-300:]!r}")
        return str(m[-1])
