"""The RL engine: a colocated GRPO-style trainer. Plain Python: never imports Django.

Importing this package (and `config`, `sample`, `judgers`) must not import torch or Ray: the web
process uses the config schema and the judgers without them.
"""
