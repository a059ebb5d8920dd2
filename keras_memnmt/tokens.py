"""The reserved token ids and the largest integer a shape or seed may hold.

Every vocabulary this library writes reserves ``pad = 0``, ``unk = 1``, ``bos = 2`` and
``eos = 3``; the data, the layers, the models and the searches read these names. The
module imports nothing of the package, so any module may import it.
"""

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
MAX_INT = 2**31 - 1  # TensorFlow's shapes and seeds hold 32 bits

__all__ = ["BOS_ID", "EOS_ID", "MAX_INT", "PAD_ID", "UNK_ID"]
