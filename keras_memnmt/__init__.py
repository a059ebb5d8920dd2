"""keras_memnmt: memory-augmented recurrent NMT for Keras 3 (TensorFlow, JAX, PyTorch)."""

__version__ = "0.2.0.dev0"
