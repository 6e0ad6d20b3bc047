r"""What a transfer-learning study learned from its sources: :class:`TransferReport`.

``study.transfer_report()`` conditions the study's transfer model on its completed trials and
reports each source's learned weight. For ScaML-GP (Tighineanu et al. 2024) the test function is
modelled as ``f_t = sum_m w_m f_m + residual``: a weight near 0 means the model found that source
irrelevant, and a large residual variance means much of the test function is unexplained by the
sources (the model then behaves like plain GP-BO). RGPE's weights are ensemble weights (they sum to
1 with the ``target`` model's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class TransferReport:
    """Learned relevance of each source of a transfer-learning study.

    Attributes:
        study: Study name.
        method: Transfer method (``"scaml"``, ``"rgpe"`` ...).
        n_trials: Completed trials the model was conditioned on.
        weights: Source name -> learned weight, in the order the sources were given.
        residual_variance: ScaML-GP's residual-kernel signal variance in the objective's units
            squared (``None`` for other methods).
    """

    study: str
    method: str
    n_trials: int
    weights: dict[str, float]
    residual_variance: float | None = None
    extra: dict[str, float] = field(default_factory=dict)

    def ranked(self) -> list[tuple[str, float]]:
        """Sources by decreasing weight."""
        return sorted(self.weights.items(), key=lambda kv: -kv[1])

    def to_frame(self):
        """A pandas DataFrame with columns ``source`` and ``weight``, largest weight first."""
        import pandas as pd

        return pd.DataFrame(self.ranked(), columns=["source", "weight"])

    def to_dict(self) -> dict:
        return {
            "study": self.study,
            "method": self.method,
            "n_trials": self.n_trials,
            "weights": dict(self.weights),
            "residual_variance": self.residual_variance,
        }

    def plot(self, path: str | Path, top: int = 30) -> Path:
        """Save a horizontal bar plot of the ``top`` largest weights to ``path`` (PNG)."""
        from matplotlib.figure import Figure

        ranked = self.ranked()[:top]
        fig = Figure(figsize=(6.5, 0.35 * max(len(ranked), 3) + 1.2))
        ax = fig.subplots()
        names = [name for name, _ in ranked][::-1]
        values = [w for _, w in ranked][::-1]
        ax.barh(names, values, color="#4c72b0")
        ax.set_xlabel("learned weight")
        title = f"{self.study}: source weights ({self.method}, {self.n_trials} trials)"
        if self.residual_variance is not None:
            title += f"\nresidual variance {self.residual_variance:.3g}"
        ax.set_title(title, fontsize=10)
        fig.tight_layout()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
        return path
