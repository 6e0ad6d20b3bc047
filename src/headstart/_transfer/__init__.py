r"""Transfer-learning surrogates (private; built by :mod:`headstart._methods`).

ScaML-GP (:mod:`~headstart._transfer.scaml`), RGPE, StackGP and the multi-task GP each implement
:class:`headstart._engine.protocols.Surrogate` (:class:`~headstart._transfer.base.
TransferSurrogate`): fit the meta part once, and on every ``condition`` return a
:class:`~headstart._engine.protocols.Posterior` with the targets in its units, so the one BO
engine runs unchanged. Fitted meta-task GPs are cached through a model cache
(:mod:`~headstart._transfer.cache`). This package imports nothing from the study, storage,
sources or CLI layers.
"""
