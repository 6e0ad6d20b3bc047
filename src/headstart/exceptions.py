r"""Errors and warnings raised by headstart.

Every error a user can trigger is a subclass of :class:`HeadstartError` whose message says what was
expected, what was received and what to do about it. Some also derive from a builtin
(``ValueError``, ``KeyError`` ...) so that generic ``except`` clauses keep working.
"""

from __future__ import annotations


class HeadstartError(Exception):
    """Base class of every error raised by headstart.

    Its message never shows a database password headstart has seen (:mod:`headstart._display`).
    """

    def __init__(self, *args: object) -> None:
        from headstart._display import redact

        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


# --- search space ---------------------------------------------------------------------------------
class SearchSpaceError(HeadstartError, ValueError):
    """A parameter or prior was declared with invalid settings (bounds, choices, prior shape)."""


class InvalidParamsError(HeadstartError, ValueError):
    """A configuration does not belong to the search space (unknown, missing, out of bounds)."""


# --- studies and trials ---------------------------------------------------------------------------
class InvalidValueError(HeadstartError, ValueError):
    """An objective value is NaN, infinite or not a number."""


class ObjectiveCountError(InvalidValueError):
    """A trial was told a number of values other than the study's number of objectives."""


class ConstraintValueError(InvalidValueError):
    """Constraint values told to a study that declared none, a missing, NaN or non-number
    constraint, or a count that differs from the study's earlier trials'."""


class MultiObjectiveError(HeadstartError, RuntimeError):
    """A single-objective operation (``best_trial``, ``best_value``) on a multi-objective
    study, or a multi-objective one (``hypervolume``) on a single-objective study."""


class ReferencePointError(HeadstartError, ValueError):
    """A hypervolume reference point of the wrong length, or not finite."""


class UnknownStudyError(HeadstartError, KeyError):
    """No study with the requested name exists in the storage."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable.
        return str(self.args[0]) if self.args else ""


class DuplicatedStudyError(HeadstartError, ValueError):
    """A study with this name already exists with a different search space or direction."""


class UnknownTrialError(HeadstartError, KeyError):
    """The trial does not belong to this study (or does not exist at all)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class TrialAlreadyFinishedError(HeadstartError, RuntimeError):
    """A trial that is already complete or failed was told a second time."""


class ReadOnlyAttributesError(HeadstartError, TypeError):
    """``user_attrs`` was changed in place; ``set_user_attr(key, value)`` stores an attribute."""


class NoCompletedTrialsError(HeadstartError, ValueError):
    """An operation needs at least one completed trial, and the study has none."""


class PriorDensityError(HeadstartError, ValueError):
    """A user-supplied joint prior density returned NaN, inf or a negative value."""


class InvalidSettingError(HeadstartError, ValueError):
    """A study, strategy or benchmark option has an invalid value."""


# --- transfer meta-data --------------------------------------------------------------------------
class SourceSpaceMismatchError(HeadstartError, ValueError):
    """A source of meta-data (study, DataFrame, array) does not live in the study's search space."""


class EmptySourceError(HeadstartError, ValueError):
    """A source of meta-data has no completed trials or no rows."""


class MetaDataValueError(InvalidValueError):
    """Meta-data hold a NaN, infinite or non-numeric value (the message names the task and row)."""


class SourceFileError(HeadstartError, OSError):
    """A meta-data file (CSV) cannot be found or parsed."""


# --- storage --------------------------------------------------------------------------------------
class PriorModelError(HeadstartError, ValueError):
    """A pre-trained MPHD prior file is unreadable: wrong format or version, tampered, corrupt."""


class PretrainingDataError(HeadstartError, ValueError):
    """Too little (or unusable) data to pre-train an MPHD prior."""


class StorageError(HeadstartError):
    """The storage could not be opened, read or written."""


class StorageVersionError(StorageError):
    """The storage's schema version is not one this headstart version can read."""


class ForeignStorageError(StorageError):
    """The database belongs to another application (e.g. an Optuna storage); nothing was written."""


class StorageNotFoundError(StorageError):
    """A command that only reads was pointed at a database that does not exist."""


# --- models ---------------------------------------------------------------------------------------
class ModelFittingError(HeadstartError, RuntimeError):
    """A surrogate model could not be fitted, even after the fallbacks were tried."""


# --- kernel search ------------------------------------------------------------------------------
class KernelExpressionError(HeadstartError, ValueError):
    """A kernel expression string does not parse (the message points at the position)."""


class DatasetError(HeadstartError, ValueError):
    """A data set handed to the kernel search cannot be used as it is."""


class MissingValuesError(DatasetError):
    """The data set has empty or NaN cells (the message names the columns)."""


class NonNumericColumnError(DatasetError):
    """A column of the data set holds text or other non-numeric values (the message names it)."""


class UnknownColumnError(DatasetError, KeyError):
    """The requested target column does not exist (the message lists the columns)."""

    def __str__(self) -> str:  # KeyError would print the message with quotes around it
        return str(self.args[0]) if self.args else ""


class TooFewRowsError(DatasetError):
    """The data set has fewer rows than a GP kernel search needs (5)."""


class ConstantTargetError(DatasetError):
    """Every target value is the same, so no kernel can explain anything."""


# --- warnings -------------------------------------------------------------------------------------
class HeadstartWarning(UserWarning):
    """Base class of every warning issued by headstart."""


class NumericsWarning(HeadstartWarning):
    """A numerical fallback (jitter, clipping, refit) was needed."""


__all__ = [
    "ConstantTargetError",
    "ConstraintValueError",
    "DatasetError",
    "DuplicatedStudyError",
    "EmptySourceError",
    "ForeignStorageError",
    "HeadstartError",
    "HeadstartWarning",
    "InvalidParamsError",
    "InvalidSettingError",
    "InvalidValueError",
    "KernelExpressionError",
    "MetaDataValueError",
    "MissingValuesError",
    "ModelFittingError",
    "MultiObjectiveError",
    "NoCompletedTrialsError",
    "NonNumericColumnError",
    "NumericsWarning",
    "ObjectiveCountError",
    "PretrainingDataError",
    "PriorDensityError",
    "PriorModelError",
    "ReadOnlyAttributesError",
    "ReferencePointError",
    "SearchSpaceError",
    "SourceFileError",
    "SourceSpaceMismatchError",
    "StorageError",
    "StorageNotFoundError",
    "StorageVersionError",
    "TooFewRowsError",
    "TrialAlreadyFinishedError",
    "UnknownColumnError",
    "UnknownStudyError",
    "UnknownTrialError",
]
