"""keras_memnmt: memory-augmented recurrent NMT for Keras 3 (TensorFlow, JAX, PyTorch)."""

__version__ = "0.1.0.dev0"
