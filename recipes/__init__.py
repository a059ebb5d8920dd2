"""Experiments: one file per recipe, each a small typed ``CONFIG`` (see TrainConfig)."""
