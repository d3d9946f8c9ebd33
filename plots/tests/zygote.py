#!/usr/bin/env python3
"""A fork server for plots/tests/run.sh: pandas and matplotlib imported once.

run.sh runs the plot scripts about 70 times; a fresh interpreter spends about
a second of each run importing pandas and matplotlib, half the test's time.
The server imports them once; each script then runs in a child forked from
that state, so every run starts where a new interpreter would after those
imports, and nothing one script does reaches the next.

  zygote.py serve SOCKET              the server (run.sh starts it in the
                                      background and kills it when it exits)
  zygote.py run SOCKET SCRIPT|- ARG...  one script (- reads it from stdin)

`run` hands its own stdin, stdout and stderr to the child (SCM_RIGHTS), in
the caller's directory and environment, and exits with the script's status:
0, the code given to sys.exit, or 1 after printing the traceback of an
uncaught exception, as python3 does. The server runs one script at a time.
"""

import json
import os
import socket
import struct
import sys


def run_child(req):
    """In the forked child: become the client's process and run its script."""
    import runpy
    import traceback

    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    script = req["argv"][0]
    sys.argv = list(req["argv"])
    sys.path[0] = "" if script == "-" else os.path.dirname(os.path.abspath(script))
    try:
        if script == "-":
            code = compile(sys.stdin.read(), "<stdin>", "exec")
            exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
        else:
            runpy.run_path(script, run_name="__main__")
        rc = 0
    except SystemExit as e:
        if e.code is None:
            rc = 0
        elif isinstance(e.code, int):
            rc = e.code
        else:
            print(e.code, file=sys.stderr)
            rc = 1
    except BaseException:  # noqa: B902 - as the interpreter does: print, status 1
        traceback.print_exc()
        rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc & 0xFF)


def serve(path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.backends.backend_pdf  # noqa: F401 - imported for the children
    import matplotlib.pyplot  # noqa: F401
    import numpy  # noqa: F401
    import pandas  # noqa: F401

    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    while True:
        conn, _ = srv.accept()
        with conn:
            msg, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
            while chunk := conn.recv(1 << 16):  # the client shuts its side after the request
                msg += chunk
            if len(fds) != 3:
                for fd in fds:
                    os.close(fd)
                continue
            req = json.loads(msg)
            pid = os.fork()
            if pid == 0:
                srv.close()
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                    os.close(fd)
                run_child(req)
            for fd in fds:
                os.close(fd)
            _, status = os.waitpid(pid, 0)
            conn.sendall(struct.pack("!i", os.waitstatus_to_exitcode(status)))


def run(path, argv):
    req = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        socket.send_fds(s, [req], [0, 1, 2])
        s.shutdown(socket.SHUT_WR)
        reply = b""
        while len(reply) < 4:
            chunk = s.recv(4 - len(reply))
            if not chunk:
                print("zygote.py: the server died running " + argv[0], file=sys.stderr)
                return 1
            reply += chunk
    rc = struct.unpack("!i", reply)[0]
    return rc if rc >= 0 else 128 - rc  # killed by a signal: as a shell reports it


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "run":
        return run(sys.argv[2], sys.argv[3:])
    print(__doc__.split("\n\n")[2], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
