"""The ASGI application of `memnmt serve`: TensorFlow Serving's REST API, and a page.

Why Starlette on uvicorn: the server needs routing, request bodies read as a stream (so
an oversized body is refused before it is all read), lifespan hooks (the batcher starts
and drains with the server) and a graceful stop on SIGINT/SIGTERM, and nothing more.
Starlette gives exactly these in one small dependency, and uvicorn is its reference
server (signal handling, keep-alive, HTTP/1.1 parsing); FastAPI would add request models
and OpenAPI generation on top, which a protocol fixed by TensorFlow Serving does not use.

The protocol (https://www.tensorflow.org/tfx/serving/api_rest), for the export's
signatures (:mod:`keras_memnmt.serving.translators`):

- ``GET /v1/models/NAME`` (and ``/versions/1``): the model's status;
  ``GET /v1/models/NAME/metadata``: its signatures.
- ``POST /v1/models/NAME:predict`` (and ``/versions/1:predict``) with
  ``{"instances": [...]}`` (row format: each instance a sentence, or
  ``{"sentences": "..."}``) answered by ``{"predictions": [...]}``, or ``{"inputs":
  [...]}`` / ``{"inputs": {"sentences": [...]}}`` (columnar) answered by ``{"outputs":
  {...}}``; ``"signature_name"`` picks ``translate`` (the default, as
  ``serving_default``) or ``translate_n_best``. Any string, a sentence or an instance's
  prefix or constraint, may be given as ``{"b64": "..."}``: base64 of its UTF-8 bytes.
  A score that is not finite (``-inf``: an n-best entry a tiny vocabulary leaves empty)
  is answered as ``null``, since JSON has no infinity.
- Beyond TensorFlow Serving (a client that sends none of these works with both):
  ``"options"`` in the request (search settings, :func:`keras_memnmt.decoding.settings.from_options`),
  ``"warnings"`` in the answer (a sentence truncated to the translator's 200 subwords),
  ``GET /v1/models`` (the models served) and ``POST /v1/models/NAME:inspect`` (the
  page's n-best lists, with pictures unless ``"pictures": false``).

Every error is ``{"error": "message"}`` with an HTTP status: 400 for a bad request, 403
for a browser page of another origin (or a Host that is no name of a loopback server),
404 for an unknown model or path, 405 for a wrong method, 413 for a body over
``max_body`` bytes or a request of more sentences than the queue holds, 503 when the
queue is full or the server is stopping, 504 for a request not answered within
``timeout`` seconds, 500 if translating fails (the traceback goes to the server's
stderr, not to the client).

Browsers: a request with an ``Origin`` header is served only from the server's own page
(the origin of the Host it was sent to) or from an origin in ``allow_origins``, which
also get CORS headers (Starlette's ``CORSMiddleware``); the check stops another site's
page from making a visitor's browser post to the server. A server on a loopback address
answers only a Host that names one (``localhost``, ``127.0.0.1``, ``[::1]``), so a page
cannot reach it through a DNS name of its own that points at 127.0.0.1.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import functools
import json
import math
import sys
import traceback
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING

from keras_memnmt.data import MAX_INPUT_TOKENS
from keras_memnmt.serving.batching import Batcher
from keras_memnmt.serving.translators import DEFAULT_SIGNATURE, INPUT, SIGNATURES, RequestError, ServingTranslator

if TYPE_CHECKING:
    from starlette.exceptions import HTTPException

PICTURE_SENTENCES = 4  # the page's pictures: of at most this many sentences per request
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


INSTANCE_FIELDS = {INPUT, "prefix", "constraints"}  # "prefix" and "constraints": beyond TensorFlow Serving


def parse_predict(body) -> tuple[str, list[tuple[str, str, str]], bool, dict]:
    """A predict request's ``(signature, items, row format, options)``; an item is
    ``(sentence, target prefix, constraints)``, the constraints tab-separated (``""``: none)."""
    if not isinstance(body, dict):
        raise RequestError('the body must be a JSON object with "instances" or "inputs"')
    unknown = sorted(set(body) - {"signature_name", "instances", "inputs", "options"})
    if unknown:
        raise RequestError(
            f"unknown field(s) {', '.join(unknown)}: expected instances or inputs, signature_name, options"
        )
    signature = body.get("signature_name", DEFAULT_SIGNATURE)
    signature = "translate" if signature == DEFAULT_SIGNATURE else signature
    if not isinstance(signature, str) or signature not in SIGNATURES:
        raise RequestError(f"signature_name {json.dumps(signature)[:80]}: expected one of translate, translate_n_best")
    if ("instances" in body) == ("inputs" in body):
        raise RequestError('give exactly one of "instances" (row format) and "inputs" (columnar format)')
    row = "instances" in body
    given = body["instances"] if row else body["inputs"]
    if not row and isinstance(given, dict):
        if set(given) != {INPUT}:
            raise RequestError(f'inputs: expected {{"{INPUT}": [...]}}, got the keys {sorted(given)}')
        given = given[INPUT]
    if not isinstance(given, list):
        raise RequestError(
            f"{'instances' if row else 'inputs'}: expected a list of sentences, got {json.dumps(given)[:80]}"
        )
    items = []
    for i, item in enumerate(given):
        where = f"{'instances' if row else 'inputs'}[{i}]"
        prefix, constraints = "", []
        if row and isinstance(item, dict) and not is_b64(item):
            if INPUT not in item or not set(item) <= INSTANCE_FIELDS:
                raise RequestError(
                    f'{where}: expected a string or {{"{INPUT}": "...", "prefix": "...", '
                    f'"constraints": ["...", ...]}}, got the keys {sorted(item)}'
                )
            prefix = string_of(item.get("prefix", ""), where + ".prefix")
            if prefix is None:
                raise RequestError(f"{where}.prefix: expected a string, got {json.dumps(item['prefix'])[:80]}")
            given_constraints = item.get("constraints", [])
            constraints = (
                [string_of(c, f"{where}.constraints[{j}]") for j, c in enumerate(given_constraints)]
                if isinstance(given_constraints, list)
                else None
            )
            if constraints is None or not all(isinstance(c, str) and "\t" not in c for c in constraints):
                raise RequestError(
                    f"{where}.constraints: expected a list of phrases (strings without "
                    f"tabs), got {json.dumps(given_constraints)[:80]}"
                )
            item = item[INPUT]
        text = string_of(item, where)
        if text is None:
            raise RequestError(f"{where}: expected a string, got {json.dumps(item)[:80]}")
        for value, field in ((text, ""), (prefix, ".prefix"), *((c, ".constraints") for c in constraints)):
            check_text(value, where + field)
        items.append((text, prefix, "\t".join(c.strip() for c in constraints if c.strip())))
    return signature, items, row, body.get("options") or {}


def is_b64(value) -> bool:
    """Whether ``value`` is TensorFlow Serving's encoding of a string, ``{"b64": ...}``."""
    return isinstance(value, dict) and set(value) == {"b64"}


def string_of(value, where: str) -> str | None:
    """The text of a JSON string, or of ``{"b64": "..."}`` (TensorFlow Serving's encoding
    of a string value: base64, RFC 4648's alphabet with padding, of UTF-8 bytes); None
    for any other value. A ``b64`` that is not base64 of UTF-8 text is a ``RequestError``
    naming ``where``."""
    if isinstance(value, str):
        return value
    if not is_b64(value):
        return None
    encoded = value["b64"]
    if not isinstance(encoded, str):
        raise RequestError(f"{where}.b64: expected a base64 string, got {json.dumps(encoded)[:80]}")
    try:
        data = base64.b64decode(encoded, validate=True)
    except ValueError:  # binascii.Error, or a character outside ASCII
        raise RequestError(
            f"{where}.b64: not base64 (RFC 4648: A-Z, a-z, 0-9, '+', '/', '=' padding to a multiple of 4 characters)"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RequestError(f"{where}.b64: its bytes are not UTF-8 text (byte {e.start})") from None


def check_text(text: str, where: str) -> None:
    """A ``RequestError`` naming ``where`` if ``text`` is no UTF-8 text: JSON's ``\\ud800``
    escapes decode to lone surrogates, which the tokenizer cannot read."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise RequestError(
            f"{where}: not UTF-8 text (a lone surrogate, U+{ord(text[e.start]):04X}, at character {e.start})"
        ) from None


def json_score(score: float) -> float | None:
    """``score``, or None (JSON's ``null``) if it is not finite: JSON has no infinity,
    and an n-best entry that a tiny vocabulary leaves empty scores ``-inf``."""
    return score if math.isfinite(score) else None


LOG_PROB = {"translate": "log_prob", "translate_n_best": "log_probs"}


def answer(signature: str, results: list[list[tuple]], row: bool) -> dict:
    """The predictions (row format) or outputs (columnar) of each sentence's n-best list;
    a score that is not finite is None (:func:`json_score`).

    Each entry of ``results`` is ``(translation, score)`` or ``(translation, score,
    log_prob, finished)``: ``score`` is the length-normalized log-probability the search ranks by
    (the signature's output), ``log_prob`` the model's log-probability, eos included
    (answered as ``log_prob`` / ``log_probs`` where the translator gives it)."""
    names = (*SIGNATURES[signature], LOG_PROB[signature])
    kinds = 3 if results and results[0] and len(results[0][0]) >= 3 else 2
    if signature == "translate":
        values = [(best[0][0], *(json_score(x) for x in best[0][1:kinds])) for best in results]
    else:
        values = [
            ([h[0] for h in best], *([json_score(h[k]) for h in best] for k in range(1, kinds))) for best in results
        ]
    if row:
        return {"predictions": [dict(zip(names, v)) for v in values]}
    return {"outputs": {name: [v[k] for v in values] for k, name in enumerate(names[:kinds])}}


def host_name(header: str) -> str:
    """The name in a Host header: ``[::1]:8501`` -> ``::1``, ``localhost:8501`` -> ``localhost``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class OriginGate:
    """ASGI middleware: a request whose ``Origin`` is neither the server's own (the
    origin of the Host it was sent to) nor one of ``allow_origins`` gets 403; on a
    loopback server (``hosts``: the names it answers to), so does a request whose Host
    names none of them."""

    def __init__(self, app, allow_origins=(), hosts: Sequence[str] | None = None):
        self.app, self.allow_origins, self.hosts = app, set(allow_origins), hosts

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host")
        why = None
        if self.hosts is not None and host is not None and host_name(host) not in self.hosts:
            why = (
                f"Host {json.dumps(host)[:80]} is no name of this server ({', '.join(self.hosts)}): "
                "it answers on its loopback address only"
            )
        origin = headers.get("origin")
        if why is None and origin is not None:
            own = f"{scope.get('scheme', 'http')}://{host}".lower() if host else None
            if origin.lower() != own and origin.lower() not in self.allow_origins:
                why = (
                    f"requests from the origin {json.dumps(origin)[:80]} are not allowed: only this "
                    "server's page, or an origin given with --allow-origin"
                )
        if why is None:
            return await self.app(scope, receive, send)
        from starlette.responses import JSONResponse

        await JSONResponse({"error": why}, status_code=403)(scope, receive, send)


@dataclasses.dataclass
class ServerState:
    """What the handlers of one application read, stored on it as ``app.state.server``:
    the translator served as model ``name``, the batcher that queues its requests (its
    limits: ``max_batch``, ``max_wait``, ``max_queue``, ``timeout``; its counters:
    ``batches``, ``sentences``), ``max_body`` (the most bytes a request body may have) and
    the page's HTML."""

    translator: ServingTranslator
    name: str
    batcher: Batcher
    max_body: int
    page: str


def state_of(request) -> ServerState:
    """The :class:`ServerState` of the application that ``request`` came to."""
    return request.app.state.server


def _json(content, status_code: int = 200):
    from starlette.responses import JSONResponse

    return JSONResponse(content, status_code=status_code)


def model_of(request) -> ServingTranslator:
    """The translator of the model the path names; a ``RequestError`` (404, or 405 for a
    GET on a POST verb's path) if it names none this server has."""
    state = state_of(request)
    name = state.name
    asked = request.path_params["name"]
    version = request.path_params.get("version")
    if ":" in asked and asked.split(":", 1)[0] == name:  # GET on a POST verb's path
        raise RequestError(f"{request.method} is not allowed on {request.url.path}", 405)
    if asked != name:
        raise RequestError(f"no model named {json.dumps(asked)}; this server has {json.dumps(name)}", 404)
    if version is not None and version != "1":
        raise RequestError(f"model {name} has version 1 only, not {json.dumps(version)}", 404)
    return state.translator


async def read_json(request):
    """The request's body as JSON, read as a stream: a body over ``max_body`` bytes is
    refused (413) before it is all read; a body that is not UTF-8 JSON is a 400."""
    max_body = state_of(request).max_body
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_body:
        raise RequestError(
            f"the body has {length} bytes, more than this server takes ({max_body}, --max-body-bytes)", 413
        )
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_body:
            raise RequestError(
                f"the body has more than {max_body} bytes, the most this server takes (--max-body-bytes)", 413
            )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RequestError(f"the body is not UTF-8 (byte {e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise RequestError(f"the body is not JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise RequestError("the body's JSON is nested too deeply") from None
    except ValueError as e:  # an integer of more digits than Python converts (sys.set_int_max_str_digits)
        raise RequestError(f"the body's JSON has a value out of range: {e}") from None


def warnings_of(translator: ServingTranslator, sentences: list[str], field: str) -> list[str]:
    """A warning for each of ``sentences`` (``field[i]``) longer than the translator reads."""
    lengths = translator.source_lengths(sentences) or []
    return [
        f"{field}[{i}] has {n} subword tokens; its first {MAX_INPUT_TOKENS} were translated"
        for i, n in enumerate(lengths)
        if n > MAX_INPUT_TOKENS
    ]


async def translate(state: ServerState, items: list[tuple[str, str, str]], options: dict, signature: str):
    """Each item's n-best list, translated in the batcher's batches; the options and the
    items are checked first, so that a bad one fails its own request only."""
    key = state.translator.search(options, signature)
    state.translator.check_items(items, key)
    return await state.batcher.submit(key, items) if items else []


def translate_batch(translator: ServingTranslator, key, items: list[tuple[str, str, str]], cancelled) -> list:
    """The batcher's work: ``items`` translated with the search ``key``."""
    return translator.translate(items, key, cancelled)


async def predict(request):
    """``POST /v1/models/NAME:predict``: TensorFlow Serving's predict, in row or columnar format."""
    translator = model_of(request)
    signature, items, row, options = parse_predict(await read_json(request))
    results = await translate(state_of(request), items, options, signature)
    body = answer(signature, results, row)
    warnings = warnings_of(translator, [text for text, _, _ in items], "instances" if row else "inputs")
    return _json({**body, "warnings": warnings} if warnings else body)


async def inspect(request):
    """``POST /v1/models/NAME:inspect``: the page's n-best lists, with the pictures of the
    first ``PICTURE_SENTENCES`` sentences unless ``"pictures": false``."""
    translator = model_of(request)
    state = state_of(request)
    body = await read_json(request)
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("sentences"), list)
        or not all(isinstance(s, str) for s in body["sentences"])
        or not set(body) <= {"sentences", "options", "pictures"}
    ):
        raise RequestError('expected {"sentences": ["...", ...], "options": {...}, "pictures": true}')
    drawn = body.get("pictures", True)
    if not isinstance(drawn, bool):
        raise RequestError(f"pictures: expected true or false, got {json.dumps(drawn)[:80]}")
    sentences = body["sentences"]
    for i, sentence in enumerate(sentences):
        check_text(sentence, f"sentences[{i}]")
    results = await translate(state, [(s, "", "") for s in sentences], body.get("options") or {}, "translate_n_best")
    out = []
    for i, (source, best) in enumerate(zip(sentences, results)):
        pictures = []
        if drawn and i < PICTURE_SENTENCES and best[0][0]:
            pictures = await state.batcher.run_alone(translator.pictures, source, best[0][0])
        out.append(
            {
                "source": source,
                "translations": [
                    {
                        "translation": h[0],
                        "score": json_score(h[1]),
                        **({"log_prob": json_score(h[2])} if len(h) > 2 else {}),
                    }
                    for h in best
                ],
                "pictures": pictures,
            }
        )
    warnings = warnings_of(translator, sentences, "sentences")
    return _json({"results": out, **({"warnings": warnings} if warnings else {})})


async def status(request):
    """``GET /v1/models/NAME`` (and ``/versions/1``): the model's status."""
    model_of(request)
    return _json(
        {
            "model_version_status": [
                {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
            ]
        }
    )


async def metadata(request):
    """``GET /v1/models/NAME/metadata``: the model's signatures."""
    model_of(request)
    signature_def = {
        sig: {
            "inputs": {INPUT: {"dtype": "DT_STRING", "tensor_shape": {"dim": [{"size": "-1"}]}}},
            "outputs": {out: {"dtype": "DT_STRING" if i == 0 else "DT_FLOAT"} for i, out in enumerate(outs)},
            "method_name": "tensorflow/serving/predict",
        }
        for sig, outs in SIGNATURES.items()
    }
    signature_def[DEFAULT_SIGNATURE] = signature_def["translate"]
    return _json(
        {
            "model_spec": {"name": state_of(request).name, "signature_name": "", "version": "1"},
            "metadata": {"signature_def": {"signature_def": signature_def}},
        }
    )


async def models(request):
    """``GET /v1/models``: the model served, what its translator says of it, and the batching."""
    state = state_of(request)
    batcher = state.batcher
    return _json(
        {
            "models": [
                {
                    "name": state.name,
                    **state.translator.describe(),
                    "batching": {
                        "max_batch": batcher.max_batch,
                        "max_wait_ms": batcher.max_wait * 1000,
                        "max_queue": batcher.max_queue,
                        "timeout_s": batcher.timeout,
                        "batches": batcher.batches,
                        "sentences": batcher.sentences,
                    },
                }
            ]
        }
    )


async def home(request):
    """``GET /``: the page."""
    from starlette.responses import HTMLResponse

    return HTMLResponse(state_of(request).page)


async def request_error(request, error: RequestError):
    """A ``RequestError``: its message, with its status."""
    return _json({"error": str(error)}, status_code=error.status)


async def http_error(request, error: HTTPException):
    """Starlette's own errors (an unknown path, a wrong method) as ``{"error": ...}``."""
    message = {
        404: f"no such path: {request.url.path}",
        405: f"{request.method} is not allowed on {request.url.path}",
    }.get(error.status_code, str(error.detail))
    return _json({"error": message}, status_code=error.status_code)


async def server_error(request, error: Exception):
    """Any other exception: 500, its traceback on the server's stderr."""
    traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
    return _json({"error": f"translating failed: {type(error).__name__}: {error}"}, status_code=500)


@contextlib.asynccontextmanager
async def lifespan(app):
    """The batcher runs while the server does; on the server's stop it drains (what is
    queued is still translated)."""
    batcher = app.state.server.batcher
    batcher.start()
    try:
        yield
    finally:
        await batcher.close()


ROUTES = (
    ("/", home, "GET"),
    ("/v1/models", models, "GET"),
    ("/v1/models/{name}", status, "GET"),
    ("/v1/models/{name}/versions/{version}", status, "GET"),
    ("/v1/models/{name}/metadata", metadata, "GET"),
    ("/v1/models/{name}:predict", predict, "POST"),
    ("/v1/models/{name}/versions/{version}:predict", predict, "POST"),
    ("/v1/models/{name}:inspect", inspect, "POST"),
)


def create_app(
    translator: ServingTranslator,
    name: str,
    max_batch: int = 32,
    max_wait: float = 0.005,
    max_queue: int = 1024,
    max_body: int = 1 << 20,
    timeout: float = 60.0,
    host: str | None = None,
    allow_origins: Sequence[str] = (),
):
    """The Starlette application serving ``translator`` as model ``name``; ``host`` (the
    address it listens on: a loopback one restricts the Host header) and
    ``allow_origins`` as the module says; ``timeout``: seconds a request may take.

    Its handlers are this module's functions (:data:`ROUTES`); they read the
    :class:`ServerState` at ``app.state.server``. ``app.state.batcher`` is its batcher."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.middleware.cors import CORSMiddleware
    from starlette.routing import Route

    batcher = Batcher(
        functools.partial(translate_batch, translator),
        max_batch=max_batch,
        max_wait=max_wait,
        max_queue=max_queue,
        timeout=timeout,
    )
    page = resources.files("keras_memnmt.serving").joinpath("page.html").read_text(encoding="utf-8")
    loopback = host is not None and _is_loopback(host)
    middleware = [
        Middleware(
            OriginGate, allow_origins=allow_origins, hosts=sorted({*LOOPBACK_NAMES, host.lower()}) if loopback else None
        )
    ]
    if allow_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(allow_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["Content-Type"],
            )
        )
    app = Starlette(
        routes=[Route(path, handler, methods=[method]) for path, handler, method in ROUTES],
        lifespan=lifespan,
        middleware=middleware,
        exception_handlers={RequestError: request_error, HTTPException: http_error, Exception: server_error},
    )
    app.state.server = ServerState(translator=translator, name=name, batcher=batcher, max_body=max_body, page=page)
    app.state.batcher = batcher
    return app


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: not known to be loopback
        return False
