"""Greedy and beam search over any decoder's single step.

Both searches drive a step callback
`next_fn(tokens (N,), states [(N, ·), ...]) -> (logits (N, V), new_states, attention (N, Tx) | None)`
inside one compiled loop (`keras.ops.while_loop`; on TensorFlow a `tf.while_loop` with
shape invariants, so that finished sentences can leave it); see
`keras_memnmt.decoding.common`.

Why not keras-hub's samplers (`keras_hub.samplers.GreedySampler`, `BeamSampler`): they
extend a fixed-length prompt buffer and rank beams by their raw accumulated
log-probability (`return_all_beams` gives every beam with it). This library's searches
also need length penalties (GNMT, average) applied to finished hypotheses, a set of
finished hypotheses kept per sentence while the other beams go on, n-best lists scored as
they are ranked, each step's attention (alignments, `--show-attention`), finished
sentences leaving the loop, and ensembles that average their members' probabilities.
Sampling (`greedy_search(sampling=...)`) is not keras-hub's `TopKSampler` / `TopPSampler`
either: those draw with `keras.random`, whose numbers differ from backend to backend;
here each sentence's draws come from an integer hash of its own key, the step and the
token (`common.gumbel_noise`), so a seed gives the same samples on every backend, in any
batch and after a resumed translation, inside the same loop as target prefixes.
`constrained_beam_search` keeps given target phrases in every output (dynamic beam
allocation, `keras_memnmt.decoding.constrained`).
"""

import importlib

# Loaded on first use (PEP 562), so that `keras_memnmt.decoding.settings` and `.modes`, which
# the command line reads to make its flags, import no backend.
_EXPORTS = {
    "beam_search": "beam",
    "LENGTH_PENALTIES": "common",
    "length_penalty": "common",
    "constrained_beam_search": "constrained",
    "greedy_search": "greedy",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
