"""``memnmt serve``: a run, an ensemble or an export over HTTP (TensorFlow Serving's REST API).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys

from keras_memnmt.cli.args import ENSEMBLE_CHECKPOINT_HELP, members_of, positive_int


def _check_address(host: str, port: int) -> None:
    """A one-line error for a port that is taken (before the model is loaded)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ValueError(f"--host {host}: {e.strerror}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as e:
            raise ValueError(f"--host {host} --port {port}: cannot listen there ({e.strerror})") from None


def cmd_serve(args) -> int:
    try:
        import uvicorn
    except ImportError:
        raise ValueError("memnmt serve needs Starlette and uvicorn: pip install 'keras-memnmt[serve]'") from None
    from keras_memnmt.serving.app import create_app
    from keras_memnmt.serving.translators import load_translator

    _check_address(args.host, args.port)
    members = members_of(args)
    name = args.name or os.path.basename(os.path.normpath(members[0][0])) or "model"
    translator = load_translator(members)
    app = create_app(translator, name, max_batch=args.max_batch, max_wait=args.max_wait_ms / 1000,
                     max_queue=args.max_queue, max_body=args.max_body_bytes)
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"serving {name} ({translator.kind}) at http://{host}:{args.port}/ ; "
          f"POST /v1/models/{name}:predict; Ctrl-C stops", file=sys.stderr, flush=True)
    # On SIGINT/SIGTERM: no new connections, the requests in flight finish (at most --grace
    # seconds), then the lifespan's end translates what is still queued.
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning",
                            timeout_graceful_shutdown=args.grace)
    _server_class(uvicorn)(config).run()
    print(f"stopped serving {name}", file=sys.stderr)
    return 0


def _server_class(uvicorn):
    class Server(uvicorn.Server):
        """uvicorn's server, whose graceful stop on SIGINT/SIGTERM ends with exit status 0:
        uvicorn itself raises the signal again after it, so that the process dies by it."""

        @contextlib.contextmanager
        def capture_signals(self):
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Server


def add_parsers(sub) -> None:
    """The ``serve`` command."""
    sv = sub.add_parser("serve", help="serve a run, an ensemble or a SavedModel export over HTTP "
                                      "(TensorFlow Serving's REST API) with a page at /")
    sv.add_argument("--model", required=True, action="append",
                    help="a run directory from `memnmt train` (repeat it: an ensemble), or one export "
                         "folder from `memnmt export`")
    sv.add_argument("--checkpoint", action="append", help=ENSEMBLE_CHECKPOINT_HELP)
    sv.add_argument("--name", help="the model's name in /v1/models/NAME (default: the folder's name)")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this "
                    "machine only; 0.0.0.0 makes it reachable from others)")
    sv.add_argument("--port", type=int, default=8501, help="port (default 8501, TensorFlow Serving's REST port)")
    sv.add_argument("--max-batch", type=positive_int, default=32,
                    help="sentences translated together at most (default 32); 1: one request at a time")
    sv.add_argument("--max-wait-ms", type=float, default=5.0,
                    help="how long the oldest waiting request waits for others to join its batch (default 5)")
    sv.add_argument("--max-queue", type=positive_int, default=1024,
                    help="sentences that may wait; a request beyond it gets HTTP 503 at once (default 1024)")
    sv.add_argument("--max-body-bytes", type=positive_int, default=1 << 20,
                    help="largest request body (default 1 MiB); a larger one gets HTTP 413")
    sv.add_argument("--grace", type=positive_int, default=30,
                    help="seconds the requests in flight may take to finish after SIGINT/SIGTERM (default 30)")
    sv.set_defaults(func=cmd_serve)
