"""``memnmt serve``: a run, an ensemble or an export over HTTP (TensorFlow Serving's REST API)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import re
import signal
import socket
import sys
import time

from keras_memnmt.cli.args import ENSEMBLE_CHECKPOINT_HELP, int_at_least, members_of, positive_int

MAX_WAIT_MS = 60_000.0  # --max-wait-ms at most: a batch that waits a minute to fill is a mistake
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a model name that /v1/models/NAME:predict can route


def port_number(text: str) -> int:
    """An argparse ``type``: a TCP port, 1 to 65535."""
    value = int_at_least(1)(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 1 to 65535, got {value}")
    return value


def number_in(low: float, high: float, unit: str, above_low: bool = False):
    """An argparse ``type``: a finite number of ``unit`` from ``low`` (or above it, with
    ``above_low``) to ``high``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number of {unit}, got {text!r}") from None
        if not (math.isfinite(value) and (value > low if above_low else value >= low) and value <= high):
            raise argparse.ArgumentTypeError(
                f"must be a number of {unit} {'above' if above_low else 'from'} "
                f"{low:g} {'and at most' if above_low else 'to'} {high:g}, got {text!r}"
            )
        return value

    return parse


milliseconds = number_in(0, MAX_WAIT_MS, "milliseconds")
seconds = number_in(0, 86400, "seconds", above_low=True)  # at most a day


def origin(text: str) -> str:
    """An argparse ``type``: a web origin, ``scheme://host[:port]`` without a path."""
    if not re.fullmatch(r"https?://[^/\s?#]+", text):
        raise argparse.ArgumentTypeError(f"expected an origin such as http://localhost:3000 (no path), got {text!r}")
    return text.lower()


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
    # TensorFlow's Python logger (tf.get_logger()) would warn, about 700 characters each
    # time, of the retracing that requests of new batch sizes and widths cause: the search
    # compiles one program per batch size (per shape with a prefix or constraints;
    # Generator.generate) by design. This process logs TensorFlow's errors only.
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    members = members_of(args)
    name = args.name or os.path.basename(os.path.normpath(members[0][0])) or "model"
    if not NAME.fullmatch(name):
        raise ValueError(
            f"model name {name!r}: a name in /v1/models/NAME has only letters, digits, '.', '_' "
            "and '-' (and starts with a letter or digit); give one with --name"
        )
    translator = load_translator(members)
    app = create_app(
        translator,
        name,
        max_batch=args.max_batch,
        max_wait=args.max_wait_ms / 1000,
        max_queue=args.max_queue,
        max_body=args.max_body_bytes,
        timeout=args.timeout,
        host=args.host,
        allow_origins=args.allow_origin or (),
    )
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"serving {name} ({translator.kind}) at http://{host}:{args.port}/ ; "
        f"POST /v1/models/{name}:predict; Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    # On SIGINT/SIGTERM: no new connections or requests; those in flight and queued are
    # translated until --grace seconds have passed (less one, for the answers to go out),
    # then answered 503; a translation still running then is abandoned.
    batcher = app.state.batcher
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=args.grace
    )
    _server_class(uvicorn, lambda: batcher.stop_by(time.monotonic() + max(0.0, args.grace - 1)))(config).run()
    if batcher.busy:  # the model's thread cannot be stopped; the process ends without joining it
        print(
            f"stopped serving {name}; the translation still running after --grace {args.grace} s was abandoned",
            file=sys.stderr,
            flush=True,
        )
        sys.stdout.flush()
        os._exit(0)
    print(f"stopped serving {name}", file=sys.stderr)
    return 0


def _server_class(uvicorn, on_stop):
    class Server(uvicorn.Server):
        """uvicorn's server, whose graceful stop on SIGINT/SIGTERM ends with exit status 0:
        uvicorn itself raises the signal again after it, so that the process dies by it.
        ``on_stop()`` runs at the first signal."""

        def handle_exit(self, sig, frame):
            if not self.should_exit:
                on_stop()
            super().handle_exit(sig, frame)

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
    sv = sub.add_parser(
        "serve",
        help="serve a run, an ensemble or a SavedModel export over HTTP "
        "(TensorFlow Serving's REST API) with a page at /",
    )
    sv.add_argument(
        "--model",
        required=True,
        action="append",
        help="a run directory from `memnmt train` (repeat it: an ensemble), or one export folder from `memnmt export`",
    )
    sv.add_argument("--checkpoint", action="append", help=ENSEMBLE_CHECKPOINT_HELP)
    sv.add_argument("--name", help="the model's name in /v1/models/NAME (default: the folder's name)")
    sv.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 makes it reachable from others)",
    )
    sv.add_argument(
        "--port", type=port_number, default=8501, help="port (default 8501, TensorFlow Serving's REST port)"
    )
    sv.add_argument(
        "--max-batch",
        type=positive_int,
        default=32,
        help="sentences translated together at most (default 32); 1: one request at a time",
    )
    sv.add_argument(
        "--max-wait-ms",
        type=milliseconds,
        default=5.0,
        help="how long the oldest waiting request waits for others to join its batch, 0 to "
        f"{MAX_WAIT_MS:g} (default 5)",
    )
    sv.add_argument(
        "--max-queue",
        type=positive_int,
        default=1024,
        help="sentences that may wait; a request beyond it gets HTTP 503 at once (default 1024)",
    )
    sv.add_argument(
        "--max-body-bytes",
        type=positive_int,
        default=1 << 20,
        help="largest request body (default 1 MiB); a larger one gets HTTP 413",
    )
    sv.add_argument(
        "--grace",
        type=positive_int,
        default=30,
        help="seconds the requests in flight may take to finish after SIGINT/SIGTERM; those "
        "not finished then get HTTP 503 and the server exits (default 30)",
    )
    sv.add_argument(
        "--timeout",
        type=seconds,
        default=60.0,
        help="seconds a request may take, waiting and translating; one not answered by then gets HTTP 504 (default 60)",
    )
    sv.add_argument(
        "--allow-origin",
        action="append",
        type=origin,
        metavar="ORIGIN",
        help="a web origin (e.g. http://localhost:3000) whose pages may call the server from a "
        "browser, besides the server's own page; repeat it for several. Requests from "
        "other pages' origins get HTTP 403",
    )
    sv.set_defaults(func=cmd_serve)
