r"""headstart: Bayesian optimization that starts from what you already know.

Quick start::

    import headstart as hs
    space = hs.SearchSpace({"x": hs.Float(-5.0, 5.0), "n": hs.Int(1, 8)})
    study = hs.create_study("my-study", space, direction="minimize")
    for _ in range(30):
        trial = study.ask()
        study.tell(trial, objective(**trial.params))
    print(study.best_trial.params)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from headstart import exceptions as _exceptions

# Public names are loaded on first use (PEP 562), so `import headstart` and `headstart --help`
# stay fast: the study layer pulls in NumPy and SQLAlchemy, models pull in torch. The exception
# classes are every name in `headstart.exceptions.__all__` (a module that imports nothing).
_EXPORTS = {name: "headstart.exceptions" for name in _exceptions.__all__} | {
    "Beta": "headstart.priors",
    "Categorical": "headstart.space",
    "Fixed": "headstart.space",
    "Float": "headstart.space",
    "Int": "headstart.space",
    "MetaTask": "headstart._meta",
    "Normal": "headstart.priors",
    "SearchSpace": "headstart.space",
    "Study": "headstart.study",
    "TransferReport": "headstart.transfer",
    "Trial": "headstart.study",
    "Uniform": "headstart.priors",
    "create_study": "headstart.study",
    "delete_study": "headstart.study",
    "extend": "headstart.extend",
    "from_configspace": "headstart.configspace",
    "kernels": "headstart.kernels",
    "load_study": "headstart.study",
    "mphd": "headstart.mphd",
    "to_configspace": "headstart.configspace",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module)
    if module != f"{__name__}.{name}":  # a name inside a module, not a subpackage
        value = getattr(value, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly ("X as X"
    # marks a re-export, PEP 484)
    from headstart import extend as extend
    from headstart import kernels as kernels
    from headstart import mphd as mphd
    from headstart._meta import MetaTask as MetaTask
    from headstart.configspace import from_configspace as from_configspace
    from headstart.configspace import to_configspace as to_configspace
    from headstart.exceptions import *  # noqa: F403  (the names of exceptions.__all__)
    from headstart.priors import Beta as Beta
    from headstart.priors import Normal as Normal
    from headstart.priors import Uniform as Uniform
    from headstart.space import Categorical as Categorical
    from headstart.space import Fixed as Fixed
    from headstart.space import Float as Float
    from headstart.space import Int as Int
    from headstart.space import SearchSpace as SearchSpace
    from headstart.study import Study as Study
    from headstart.study import Trial as Trial
    from headstart.study import create_study as create_study
    from headstart.study import delete_study as delete_study
    from headstart.study import load_study as load_study
    from headstart.transfer import TransferReport as TransferReport

__version__ = "0.1.0"

__all__ = [*sorted(_EXPORTS), "__version__"]
