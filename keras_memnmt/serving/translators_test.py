"""The translators `memnmt serve` serves satisfy :class:`~keras_memnmt.serving.translators.ServingTranslator`,
and it names everything the server calls on a translator."""

import ast
import inspect
import os

import pytest

from keras_memnmt.serving import translators
from keras_memnmt.serving.translators import ExportTranslator, RunTranslator, ServingTranslator

# No model is loaded: the same on every backend (conftest.py).
pytestmark = pytest.mark.backend_independent

CONCRETE = (RunTranslator, ExportTranslator)


def protocol_members() -> set[str]:
    """The attributes and methods the protocol declares (its own, dunders left out)."""
    own = {name for name in vars(ServingTranslator) if not name.startswith("_")}
    return own | set(ServingTranslator.__annotations__)


def bare(cls):
    """An instance of ``cls`` whose ``__init__`` did not run (it would load a model)."""
    return cls.__new__(cls)


def test_the_protocol_declares_what_the_server_calls():
    assert protocol_members() == {
        "kind",
        "search",
        "check_items",
        "translate",
        "source_lengths",
        "pictures",
        "describe",
    }


@pytest.mark.parametrize("cls", CONCRETE, ids=lambda c: c.__name__)
def test_each_translator_satisfies_the_protocol(cls):
    assert isinstance(bare(cls), ServingTranslator)
    for name in protocol_members():
        assert hasattr(cls, name), f"{cls.__name__} has no {name}"
        wanted = getattr(ServingTranslator, name, None)
        if callable(wanted):
            given = getattr(cls, name)
            assert callable(given), f"{cls.__name__}.{name} is not a method"
            assert list(inspect.signature(given).parameters) == list(inspect.signature(wanted).parameters), (
                f"{cls.__name__}.{name}{inspect.signature(given)}: the protocol's is {inspect.signature(wanted)}"
            )
    assert isinstance(cls.kind, str)


def test_a_translator_missing_a_member_does_not_satisfy_it():
    class Partial:
        kind = "partial"

        def search(self, given, signature): ...

        def translate(self, items, search, cancelled=lambda: False): ...

    assert not isinstance(Partial(), ServingTranslator)


def attributes_called_on_translator(path: str) -> set[str]:
    """The attributes read off a name ``translator`` (or ``....translator``) in the file ``path``."""
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Attribute):
            value = node.value
            if (isinstance(value, ast.Name) and value.id == "translator") or (
                isinstance(value, ast.Attribute) and value.attr == "translator"
            ):
                found.add(node.attr)
    return found


def test_the_server_calls_nothing_outside_the_protocol():
    package = os.path.dirname(os.path.dirname(translators.__file__))
    called = set()
    for path in (os.path.join(package, "serving", "app.py"), os.path.join(package, "cli", "serve.py")):
        called |= attributes_called_on_translator(path)
    assert called, "found no call on a translator: the test reads the wrong files"
    assert called <= protocol_members(), (
        f"called on a translator but not in the protocol: {called - protocol_members()}"
    )
