"""`memnmt serve`: a translation server on TensorFlow Serving's REST protocol, with a page.

:func:`~keras_memnmt.serving.app.create_app` builds the ASGI application over a
:func:`~keras_memnmt.serving.translators.load_translator` (a run, an ensemble, or a
SavedModel export); :class:`~keras_memnmt.serving.batching.Batcher` joins concurrent
requests into batches. Needs the ``serve`` extra (Starlette and uvicorn).
"""
