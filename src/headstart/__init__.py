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

# Public names are loaded on first use (PEP 562), so `import headstart` and `headstart --help`
# stay fast: the study layer pulls in NumPy and SQLAlchemy, models pull in torch.
_EXPORTS = {
    "ReadOnlyAttributesError": "headstart.exceptions",
    "StorageNotFoundError": "headstart.exceptions",
    "ForeignStorageError": "headstart.exceptions",
    "Beta": "headstart.priors",
    "Categorical": "headstart.space",
    "ConstantTargetError": "headstart.exceptions",
    "DatasetError": "headstart.exceptions",
    "DuplicatedStudyError": "headstart.exceptions",
    "EmptySourceError": "headstart.exceptions",
    "Fixed": "headstart.space",
    "Float": "headstart.space",
    "HeadstartError": "headstart.exceptions",
    "HeadstartWarning": "headstart.exceptions",
    "Int": "headstart.space",
    "InvalidParamsError": "headstart.exceptions",
    "InvalidSettingError": "headstart.exceptions",
    "InvalidValueError": "headstart.exceptions",
    "KernelExpressionError": "headstart.exceptions",
    "MetaDataValueError": "headstart.exceptions",
    "MetaTask": "headstart._meta",
    "MissingValuesError": "headstart.exceptions",
    "ModelFittingError": "headstart.exceptions",
    "NoCompletedTrialsError": "headstart.exceptions",
    "NonNumericColumnError": "headstart.exceptions",
    "Normal": "headstart.priors",
    "NumericsWarning": "headstart.exceptions",
    "PriorDensityError": "headstart.exceptions",
    "SearchSpace": "headstart.space",
    "SearchSpaceError": "headstart.exceptions",
    "SourceFileError": "headstart.exceptions",
    "SourceSpaceMismatchError": "headstart.exceptions",
    "StorageError": "headstart.exceptions",
    "StorageVersionError": "headstart.exceptions",
    "Study": "headstart.study",
    "TooFewRowsError": "headstart.exceptions",
    "TransferReport": "headstart.transfer",
    "Trial": "headstart.study",
    "TrialAlreadyFinishedError": "headstart.exceptions",
    "Uniform": "headstart.priors",
    "UnknownColumnError": "headstart.exceptions",
    "UnknownStudyError": "headstart.exceptions",
    "UnknownTrialError": "headstart.exceptions",
    "create_study": "headstart.study",
    "delete_study": "headstart.study",
    "kernels": "headstart.kernels",
    "load_study": "headstart.study",
    "mphd": "headstart.mphd",
    "PriorModelError": "headstart.exceptions",
    "PretrainingDataError": "headstart.exceptions",
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


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from headstart import kernels, mphd
    from headstart._meta import MetaTask
    from headstart.exceptions import (
        ConstantTargetError,
        DatasetError,
        DuplicatedStudyError,
        EmptySourceError,
        ForeignStorageError,
        HeadstartError,
        HeadstartWarning,
        InvalidParamsError,
        InvalidSettingError,
        InvalidValueError,
        KernelExpressionError,
        MetaDataValueError,
        MissingValuesError,
        ModelFittingError,
        NoCompletedTrialsError,
        NonNumericColumnError,
        NumericsWarning,
        PretrainingDataError,
        PriorDensityError,
        PriorModelError,
        ReadOnlyAttributesError,
        SearchSpaceError,
        SourceFileError,
        SourceSpaceMismatchError,
        StorageError,
        StorageNotFoundError,
        StorageVersionError,
        TooFewRowsError,
        TrialAlreadyFinishedError,
        UnknownColumnError,
        UnknownStudyError,
        UnknownTrialError,
    )
    from headstart.priors import Beta, Normal, Uniform
    from headstart.space import Categorical, Fixed, Float, Int, SearchSpace
    from headstart.study import Study, Trial, create_study, delete_study, load_study
    from headstart.transfer import TransferReport

__version__ = "0.1.0"

__all__ = [
    "Beta",
    "Categorical",
    "ConstantTargetError",
    "DatasetError",
    "DuplicatedStudyError",
    "EmptySourceError",
    "Fixed",
    "Float",
    "ForeignStorageError",
    "HeadstartError",
    "HeadstartWarning",
    "Int",
    "InvalidParamsError",
    "InvalidSettingError",
    "InvalidValueError",
    "KernelExpressionError",
    "MetaDataValueError",
    "MetaTask",
    "MissingValuesError",
    "ModelFittingError",
    "NoCompletedTrialsError",
    "NonNumericColumnError",
    "Normal",
    "NumericsWarning",
    "PretrainingDataError",
    "PriorDensityError",
    "PriorModelError",
    "ReadOnlyAttributesError",
    "SearchSpace",
    "SearchSpaceError",
    "SourceFileError",
    "SourceSpaceMismatchError",
    "StorageError",
    "StorageNotFoundError",
    "StorageVersionError",
    "Study",
    "TooFewRowsError",
    "TransferReport",
    "Trial",
    "TrialAlreadyFinishedError",
    "Uniform",
    "UnknownColumnError",
    "UnknownStudyError",
    "UnknownTrialError",
    "__version__",
    "create_study",
    "delete_study",
    "kernels",
    "load_study",
    "mphd",
]
