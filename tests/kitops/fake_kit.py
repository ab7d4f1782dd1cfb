"""Stand-in for the ``kit`` binary at the process boundary (no kit release can be installed here).

Records argv and stdin as one JSON line in ``$FAKE_KIT_LOG`` and answers as kit does — output lines
``Model saved: <digest>`` / ``Pushed <digest>``, ``inspect`` JSON, exit 1 with ``[ERROR]`` on failure —
performing the work with this project's native implementation so the results are real.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv: list[str]) -> int:
    stdin = "" if sys.stdin.isatty() else sys.stdin.read()
    with open(os.environ["FAKE_KIT_LOG"], "a") as log:
        log.write(json.dumps({"argv": argv, "stdin": stdin}) + "\n")
    from airflow_provider_training.kitops import api, transfer
    from airflow_provider_training.kitops import pack as packmod
    from airflow_provider_training.kitops.localstore import LocalStore
    from airflow_provider_training.kitops.reference import parse

    p = argparse.ArgumentParser(prog="kit")
    p.add_argument("command")
    p.add_argument("args", nargs="*")
    for flag in ("-t", "-f", "-u", "-d", "--compression", "--progress", "--format", "--filter"):
        p.add_argument(flag, action="append" if flag == "--filter" else "store")
    for flag in ("--plain-http", "--password-stdin", "--remote"):
        p.add_argument(flag, action="store_true")
    p.add_argument("--tls-verify", default="true")
    a = p.parse_args(argv)
    if a.progress != "none":
        print("[ERROR] stand-in kit expects --progress none", file=sys.stderr)
        return 1
    try:
        if a.command == "pack":
            kitfile = stdin if a.f == "-" else a.f
            res = packmod.pack(
                a.args[0],
                kitfile=kitfile,
                reference=parse(a.t, default_tag="latest"),
                compression=a.compression or "none",
            )
            print(f"Model saved: {res.digest}")
        elif a.command == "push":
            ref = parse(a.args[0], default_tag="latest")
            with api.make_client(ref.registry, plain_http=a.plain_http) as client:
                print(f"Pushed {transfer.push(LocalStore(), ref, client).digest}")
        elif a.command == "login":
            api.login(a.args[0], a.u or "", stdin.strip(), plain_http=a.plain_http)
            print("Log in successful")
        elif a.command == "inspect":
            print(json.dumps(transfer.inspect_local(LocalStore(), parse(a.args[0], default_tag="latest")), indent=2))
        elif a.command == "list":
            rows = [
                {"repo": kit.repo_key, "digest": kit.descriptor.digest, "tags": list(kit.tags)}
                for kit in LocalStore().list()
            ]
            print(json.dumps(rows, indent=2))
        else:
            print(f"[ERROR] unsupported command {a.command}", file=sys.stderr)
            return 1
    except Exception as exc:
        print(f"[ERROR] {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
