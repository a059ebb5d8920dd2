"""keras_memnmt: memory-augmented recurrent NMT for Keras 3 (TensorFlow, JAX, PyTorch).

``from keras_memnmt import Translator`` (:class:`keras_memnmt.serving.translator.Translator`)
translates and scores with a run, an ensemble or an export; it is imported on first use, so
importing the package loads no backend.
"""

__version__ = "0.2.0.dev0"
__all__ = ["Translator", "__version__"]


def __getattr__(name: str):
    if name == "Translator":
        from keras_memnmt.serving.translator import Translator

        return Translator
    raise AttributeError(f"module 'keras_memnmt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"Translator"})
