r"""``headstart.kernels.api``: find a GP kernel structure for a data set.

The data are scaled as the paper's priors assume (inputs min-max to ``[0, 1]``, target
standardised), the chosen strategy (BOSOT by default) spends ``budget`` oracle calls, and the
best kernel comes back with its MAP hyperparameters and a fitted model that predicts in the
user's units.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from headstart.exceptions import (
    ConstantTargetError,
    DatasetError,
    MissingValuesError,
    ModelFittingError,
    NonNumericColumnError,
    TooFewRowsError,
    UnknownColumnError,
)
from headstart.kernels.grammar import KernelGrammar, Tree
from headstart.kernels.model import KernelModel, Scaler, TreeGP
from headstart.kernels.oracle import Oracle, OracleResult
from headstart.kernels.strategies import Evaluation, make_strategy

MIN_ROWS = 5


@dataclass
class KernelSearchResult:
    """The outcome of a kernel search.

    Attributes:
        expression: The best kernel, e.g. ``"SE[0] * PER[0] + LIN[0]"``.
        tree: The same as an expression tree.
        score: Its criterion value (log evidence / N by default; higher is better).
        log_evidence: Its Laplace log evidence on the scaled data.
        hyperparameters: MAP hyperparameters on the scaled data (inputs in [0, 1], standardised
            target), noise variance included.
        model: The kernel fitted to the data; ``model.predict(X)`` works in the user's units.
        history: One :class:`~headstart.kernels.strategies.Evaluation` per oracle call, in order.
        columns: Input column names (``x0, x1, ...`` for arrays).
    """

    expression: str
    tree: Tree
    score: float
    log_evidence: float
    hyperparameters: dict[str, float]
    model: KernelModel
    history: list[Evaluation] = field(repr=False)
    columns: list[str] = field(default_factory=list)

    def history_frame(self):
        """The oracle calls as a DataFrame (call, expression, score, best, seconds, phase)."""
        import pandas as pd

        rows, best = [], -math.inf
        for i, e in enumerate(self.history, 1):
            best = max(best, e.result.score)
            rows.append(
                {
                    "call": i,
                    "expression": e.result.expression,
                    "score": e.result.score,
                    "best": best,
                    "oracle_seconds": e.result.seconds,
                    "acquisition_seconds": e.acquisition_seconds,
                    "phase": e.phase,
                }
            )
        return pd.DataFrame(rows)


def prepare_data(X, y, columns: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Check ``X`` (``N x D``) and ``y`` (``N``) and return them as float arrays.

    Raises:
        NonNumericColumnError, MissingValuesError, TooFewRowsError, ConstantTargetError,
        DatasetError: with the offending column named.
    """
    try:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise NonNumericColumnError(
            f"The kernel search needs numbers; converting the data failed ({exc}). Encode text "
            "columns as numbers or leave them out."
        ) from None
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise DatasetError(f"X must be a 2-D array (rows x inputs); got shape {X.shape}.")
    if len(X) != len(y):
        raise DatasetError(f"X has {len(X)} rows but y has {len(y)} values; they must match.")
    names = list(columns) if columns is not None else [f"x{i}" for i in range(X.shape[1])]
    bad = [names[j] for j in range(X.shape[1]) if not np.isfinite(X[:, j]).all()]
    if not np.isfinite(y).all():
        bad.append("target")
    if bad:
        raise MissingValuesError(
            f"The data have missing or non-finite values in column(s) {', '.join(bad)}. Drop or "
            "impute those rows first."
        )
    if len(y) < MIN_ROWS:
        raise TooFewRowsError(
            f"The kernel search needs at least {MIN_ROWS} rows; got {len(y)}. Collect more data."
        )
    if np.ptp(y) == 0:
        raise ConstantTargetError(
            f"Every target value equals {y[0]!r}; a constant target has no structure to model."
        )
    return X, y


def load_csv(path: str | Path, target: str, columns: Sequence[str] | None = None):
    """Read a CSV for the kernel search: ``(X, y, input column names)``.

    Raises:
        DatasetError: The file is missing or unreadable.
        UnknownColumnError: ``target`` (or a requested input column) is not in the header.
        NonNumericColumnError: A used column holds text.
        MissingValuesError: A used column has empty cells.
    """
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"No data file at {str(path)!r}; check the path.")
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DatasetError(f"Cannot read {str(path)!r} as CSV: {exc}") from None
    if target not in frame.columns:
        raise UnknownColumnError(
            f"Target column {target!r} is not in {str(path)!r}; its columns are "
            f"{', '.join(map(str, frame.columns))}."
        )
    inputs = [c for c in frame.columns if c != target] if columns is None else list(columns)
    missing = [c for c in inputs if c not in frame.columns]
    if missing:
        raise UnknownColumnError(
            f"Input column(s) {', '.join(missing)} not in {str(path)!r}; its columns are "
            f"{', '.join(map(str, frame.columns))}."
        )
    if not inputs:
        raise DatasetError(f"{str(path)!r} has no input columns besides the target {target!r}.")
    used = frame[[*inputs, target]]
    text = [str(c) for c in used.columns if not pd.api.types.is_numeric_dtype(used[c])]
    if text:
        raise NonNumericColumnError(
            f"Column(s) {', '.join(text)} of {str(path)!r} are not numeric. Encode them as "
            "numbers, or choose the inputs with --column."
        )
    empty = {str(c): int(n) for c, n in used.isna().sum().items() if n > 0}
    if empty:
        detail = ", ".join(f"{c} ({n} empty)" for c, n in empty.items())
        raise MissingValuesError(
            f"{str(path)!r} has missing values in {detail}. Drop or impute those rows first."
        )
    X, y = prepare_data(used[inputs].to_numpy(), used[target].to_numpy(), inputs)
    return X, y, [str(c) for c in inputs]


def search(
    X,
    y,
    *,
    budget: int = 50,
    space: str | Sequence[str] = "full",
    method: str = "bosot",
    criterion: str = "laplace",
    restarts: int = 10,
    workers: int = 1,
    seed: int = 0,
    ea_steps: int = 10,
    columns: Sequence[str] | None = None,
    progress: bool = True,
    callback: Callable[[Evaluation], None] | None = None,
) -> KernelSearchResult:
    """Search the kernel grammar for the kernel with the highest evidence on ``(X, y)``.

    Args:
        X: ``N x D`` inputs (any units; scaled to ``[0, 1]`` internally).
        y: ``N`` targets (standardised internally).
        budget: Oracle calls (kernels scored).
        space: ``"full"`` (SE, LIN, PER, RQ on every input), ``"se-rq"``, or a list of kinds.
        method: ``"bosot"`` (default: BOSOT with the measured improvements of
            :class:`~headstart.kernels.strategies.BOSOT`), ``"bosot-paper"`` (the paper's
            Alg. 1-2), ``"greedy"`` or ``"random"``.
        criterion: ``"laplace"`` (log evidence / N) or ``"bic"``.
        restarts: MAP restarts per oracle call (paper: 10).
        workers: Processes that score kernels in parallel: the initial design, greedy's stages,
            random search, and BOSOT batches of ``workers`` kernels per step (kriging believer).
        seed: Seeds the search (initial design, EA, neighbour order).
        ea_steps: BOSOT's evolutionary-algorithm generations (paper: 10; 6 for Airline).
        columns: Input names, for messages and hyperparameter labels.
        progress: Show a progress bar on stderr.
        callback: Called after every oracle call with its :class:`Evaluation`.

    Returns:
        A :class:`KernelSearchResult`.

    Example:
        >>> import numpy as np
        >>> from headstart.kernels import search
        >>> X = np.linspace(0, 1, 40)[:, None]
        >>> y = np.sin(20 * X[:, 0]) + X[:, 0]
        >>> result = search(X, y, budget=4, restarts=2, progress=False)
        >>> len(result.history), result.score == max(e.result.score for e in result.history)
        (4, True)
    """
    strategy = make_strategy(method, ea_steps)
    X, y = prepare_data(X, y, columns)
    grammar = KernelGrammar(X.shape[1], space)
    scaler = Scaler.fit(X, y)
    Xs, ys = scaler.x(X), scaler.y(y)
    from headstart._progress import KernelSearchProgress

    with (
        Oracle(Xs, ys, criterion=criterion, restarts=restarts, seed=seed, workers=workers) as o,
        KernelSearchProgress(budget, enabled=progress) as bar,
    ):

        def on_call(ev: Evaluation) -> None:
            bar.update(ev)
            if callback is not None:
                callback(ev)

        history = strategy.run(grammar, o, budget, np.random.default_rng(seed), on_call)
    return build_result(history, Xs, ys, scaler, columns or [f"x{i}" for i in range(X.shape[1])])


def build_result(
    history: list[Evaluation], Xs: np.ndarray, ys: np.ndarray, scaler: Scaler, columns: list[str]
) -> KernelSearchResult:
    """Pick the best scored kernel of ``history`` and fit its model."""
    scored = [e.result for e in history if not e.result.failed]
    if not scored:
        raise ModelFittingError(
            "Every kernel the search tried failed to fit (no Cholesky factor). Check the data for "
            "duplicated rows with different targets, or rescale the target."
        )
    best: OracleResult = max(scored, key=lambda r: r.score)
    gp = TreeGP(best.tree, np.array(best.values[:-1]), best.noise, Xs, ys)
    return KernelSearchResult(
        expression=best.expression,
        tree=best.tree,
        score=best.score,
        log_evidence=best.log_evidence,
        hyperparameters=best.hyperparameters(),
        model=KernelModel(gp, scaler),
        history=history,
        columns=columns,
    )


__all__ = ["KernelSearchResult", "build_result", "load_csv", "prepare_data", "search"]
