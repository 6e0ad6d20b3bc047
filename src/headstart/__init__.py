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

from headstart import kernels
from headstart.exceptions import (
    ConstantTargetError,
    DatasetError,
    DuplicatedStudyError,
    EmptySourceError,
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
    PriorDensityError,
    SearchSpaceError,
    SourceFileError,
    SourceSpaceMismatchError,
    StorageError,
    StorageVersionError,
    TooFewRowsError,
    TrialAlreadyFinishedError,
    UnknownColumnError,
    UnknownStudyError,
    UnknownTrialError,
)
from headstart.priors import Beta, Normal, Uniform
from headstart.sources import MetaTask
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
    "PriorDensityError",
    "SearchSpace",
    "SearchSpaceError",
    "SourceFileError",
    "SourceSpaceMismatchError",
    "StorageError",
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
]
