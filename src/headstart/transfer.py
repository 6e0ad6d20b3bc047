r"""What a transfer-learning study learned from its sources: :class:`TransferReport`.

``study.transfer_report()`` conditions the study's transfer model on its completed trials and
reports each source's learned weight. For ScaML-GP (Tighineanu et al. 2024) the test function is
modelled as ``f_t = sum_m w_m f_m + residual``: a weight near 0 means the model found that source
irrelevant, and a large residual variance means much of the test function is unexplained by the
sources (the model then behaves like plain GP-BO). Raw weights depend on each source's scale, so
the report also gives each source's *share* of the model's variation, Laplace standard errors of
the weights and a :meth:`TransferReport.summary` in words. RGPE's weights are ensemble weights
(they sum to 1 with the ``target`` model's). Methods that learn no per-source weights report what
they took from the sources instead: MPHD (Fan et al. 2024) the pre-trained lengthscale prior of
each parameter beside the lengthscale fitted under it (:attr:`TransferReport.prior`), the warm
start the sources' configurations it evaluates first (:attr:`TransferReport.warm_start`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

IRRELEVANT_SHARE = 0.7  # the summary calls the sources irrelevant above this residual share


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
        shares: Each source's share of the model's variation (ScaML-GP: ``Var_x[w_m mu_m(x)]``
            over the total with the residual; comparable across sources of different scales).
        residual_share: The share no source explains.
        weight_se: Laplace standard errors of the weights (``nan``: not available).
        source_fit: Neural methods (ABLR / ABRAC): each source's training error of the shared
            basis (root mean squared, standardized values); ``weights`` is then empty.
        head: Neural methods: the target head -- ``active_basis`` (how many of the ordered basis
            functions it uses), ``ard`` (one precision per function, else one for all),
            ``ard_precisions``, ``noise_variance``, ``output_warp`` (the map of the target's
            values; with ``"auto"`` the one chosen, ``warp_lambda`` for Yeo-Johnson); with
            ``residual=True``,
            ``residual``: the Matérn GP beside it (``outputscale``, ``lengthscales``,
            ``noise_variance``, ``log_evidence`` against the head's ``head_log_evidence``).
        prior: MPHD: parameter -> ``{"prior_mean", "prior_shape", "fitted"}``, the pre-trained
            Gamma prior of its lengthscale (mean ``a / b`` and shape ``a``, unit-cube units) and
            the lengthscale the MAP fit chose under it (``None`` before the first trial);
            ``weights`` is then empty.
        trained_on: MPHD: the search spaces (studies) the prior was pre-trained on.
        warm_start: Warm start: the sources' best configurations, evaluated first.
        target_gp_weight: ScaML-GP with ``handover=True``: the target-only GP's share of the model
            behind the last suggestion (its posterior probability with ``handover_mode=
            "average"``; 0 or 1 when switching).
        target_offset: ScaML-GP with ``target_offset="fit"``: the fitted standard deviation of
            the constant offset between the study and its sources (standard deviations of the
            pooled values; near 0 when the sources' level fits the study).
        check: Whether the sources help, from the study's own trials
            (:meth:`headstart.study.Study.transfer_check`): ``with_sources`` and
            ``without_sources`` log-likelihoods per held-out trial, ``hurting``.
    """

    study: str
    method: str
    n_trials: int
    weights: dict[str, float]
    residual_variance: float | None = None
    extra: dict[str, float] = field(default_factory=dict)
    shares: dict[str, float] | None = None
    residual_share: float | None = None
    weight_se: dict[str, float] | None = None
    source_fit: dict[str, float] | None = None
    head: dict | None = None
    prior: dict[str, dict] | None = None
    trained_on: list[str] | None = None
    warm_start: list[dict] | None = None
    target_gp_weight: float | None = None
    target_offset: float | None = None
    check: dict | None = None

    def summary(self) -> str:
        """What the sources are worth so far, in words (the weights' shares and uncertainty),
        and whether they help predict the study's own later trials."""
        text = self._model_summary()
        if self.target_gp_weight is not None and self.n_trials:
            text += (
                f" Hand-over: the target-only GP carries {self.target_gp_weight:.0%} of the "
                f"model, the sources' model {1 - self.target_gp_weight:.0%}."
            )
        if self.target_offset is not None and self.n_trials:
            text += (
                f" Fitted offset between the study and its sources: {self.target_offset:.2g} "
                "standard deviations of the pooled values."
            )
        c = self.check
        if c is not None:
            text += (
                f" Held-out check (trials {c['n_fit'] + 1}-{c['n_fit'] + c['n_held_out']} "
                f"predicted from the first {c['n_fit']}): log-likelihood per trial "
                f"{c['with_sources']:.2f} with the sources, {c['without_sources']:.2f} without"
            )
            text += (
                ": the sources mislead this study; consider method='gp'." if c["hurting"] else "."
            )
        return text

    def _model_summary(self) -> str:
        if self.warm_start is not None:
            return (
                f"Warm start: the design begins with the sources' {len(self.warm_start)} best "
                f"configurations, then GP-BO ({self.n_trials} trials completed)."
            )
        if self.prior is not None:
            return self._prior_summary()
        if self.source_fit is not None:
            fits = ", ".join(f"{n} {v:.2g}" for n, v in self.source_fit.items())
            text = (
                f"Shared basis trained on {len(self.source_fit)} sources (training RMSE: {fits})."
            )
            if self.head:
                alpha = self.head.get("ard_precisions", [])
                if self.head.get("ard", True):
                    used = sum(1 for a in alpha if a < 1e3)
                    weights = f"{used} with precision < 1e3, the rest pruned by ARD"
                else:
                    weights = f"one prior precision, {alpha[0]:.2g}" if alpha else "one precision"
                text += (
                    f" After {self.n_trials} trials the target head uses "
                    f"{self.head['active_basis']} basis functions ({weights}); noise variance "
                    f"{self.head['noise_variance']:.2g}."
                )
                if self.head.get("output_warp") == "yeo-johnson":
                    lam = self.head.get("warp_lambda")
                    text += " The target's values are fitted through a Yeo-Johnson transform" + (
                        f" (lambda {lam:.2g})." if lam is not None else "."
                    )
                residual = self.head.get("residual")
                if residual:
                    text += (
                        f" The residual GP beside it has output scale "
                        f"{residual['outputscale']:.2g} (standardized units); log evidence "
                        f"{residual['log_evidence']:.1f} with it, {residual['head_log_evidence']:.1f}"
                        " for the head alone."
                    )
            return text
        if self.n_trials == 0:
            return (
                f"No completed trial yet: the {len(self.weights)} sources carry the prior's equal "
                "weights; they are re-weighted from the first result on."
            )
        if self.shares is None:
            ranked = ", ".join(f"{name} {w:.2g}" for name, w in self.ranked())
            return f"After {self.n_trials} trials the sources' weights are: {ranked}."

        def se_of(name: str) -> float | None:  # a usable standard error, else None
            se = (self.weight_se or {}).get(name)
            return se if se is not None and se == se else None

        parts = []
        for name, share in sorted(self.shares.items(), key=lambda kv: -kv[1]):
            w, se = self.weights.get(name, float("nan")), se_of(name)
            sure = "" if se is None else f" ± {se:.2g}"
            parts.append(f"{name} {share:.0%} (weight {w:.2g}{sure})")
        residual = self.residual_share or 0.0
        text = (
            f"After {self.n_trials} trials, share of the model's variation: "
            + ", ".join(parts)
            + f"; unexplained by any source: {residual:.0%}."
        )
        if residual >= IRRELEVANT_SHARE:
            text += (
                " The sources look irrelevant to this task so far: the model relies on the "
                "task's own data, like plain GP-BO."
            )
        uncertain = [n for n, w in self.weights.items() if (se := se_of(n)) and w < 2 * se]
        if uncertain and residual < IRRELEVANT_SHARE:
            text += f" Not yet distinguishable from 0 (weight < 2 s.e.): {', '.join(uncertain)}."
        return text

    def _prior_summary(self) -> str:
        spaces = self.trained_on or []
        text = (
            f"GP lengthscale priors pre-trained on {len(spaces)} search spaces "
            f"({', '.join(spaces)}). Prior mean -> fitted after {self.n_trials} trials: "
        )
        parts, off = [], []
        for name, p in (self.prior or {}).items():
            fitted = p.get("fitted")
            parts.append(
                f"{name} {p['prior_mean']:.2g} -> " + ("-" if fitted is None else f"{fitted:.2g}")
            )
            if fitted is not None and not 1 / 3 <= fitted / p["prior_mean"] <= 3:
                off.append(name)
        text += ", ".join(parts) + "."
        if off:
            text += f" The data disagree with the prior (more than 3x off) on: {', '.join(off)}."
        return text

    def ranked(self) -> list[tuple[str, float]]:
        """Sources by decreasing weight."""
        return sorted(self.weights.items(), key=lambda kv: -kv[1])

    def to_frame(self):
        """A DataFrame with ``source``, ``weight`` (and ``weight_se``, ``share`` when known);
        MPHD: ``parameter``, ``prior_mean``, ``prior_shape``, ``fitted``; neural methods:
        ``source``, ``training_rmse``; warm start: the configurations."""
        import pandas as pd

        if self.warm_start is not None:
            return pd.DataFrame(self.warm_start)
        if self.prior is not None:
            return pd.DataFrame([{"parameter": n, **p} for n, p in self.prior.items()])
        if self.source_fit is not None:
            return pd.DataFrame(list(self.source_fit.items()), columns=["source", "training_rmse"])

        frame = pd.DataFrame(self.ranked(), columns=["source", "weight"])
        if self.weight_se is not None:
            frame["weight_se"] = [self.weight_se.get(n) for n in frame["source"]]
        if self.shares is not None:
            frame["share"] = [self.shares.get(n) for n in frame["source"]]
        return frame

    def to_dict(self) -> dict:
        return {
            "study": self.study,
            "method": self.method,
            "n_trials": self.n_trials,
            "weights": dict(self.weights),
            "residual_variance": self.residual_variance,
            "shares": None if self.shares is None else dict(self.shares),
            "residual_share": self.residual_share,
            "weight_se": None if self.weight_se is None else dict(self.weight_se),
            "source_fit": self.source_fit,
            "head": self.head,
            "prior": self.prior,
            "trained_on": self.trained_on,
            "warm_start": self.warm_start,
            "target_gp_weight": self.target_gp_weight,
            "target_offset": self.target_offset,
            "check": self.check,
            "summary": self.summary(),
        }

    def plot(self, path: str | Path | None = None, top: int = 30):
        """A horizontal bar plot of the ``top`` largest weights (a ``Figure``; saved to ``path``
        when given). MPHD: each parameter's prior lengthscale (mean and 5-95% range) beside the
        fitted one; neural methods: each source's training error of the shared basis."""
        from matplotlib.figure import Figure

        from headstart._display import literal

        if self.prior is not None:
            return self._save(self._prior_plot(), path)
        ranked = self.ranked()[:top]
        label, what = "learned weight", "source weights"
        if self.source_fit is not None:  # neural methods: how well the shared basis fits each
            ranked = sorted(self.source_fit.items(), key=lambda kv: kv[1])[:top]
            label, what = "training RMSE of the shared basis (standardized)", "source fit"
        fig = Figure(figsize=(6.5, 0.35 * max(len(ranked), 3) + 1.2))
        ax = fig.subplots()
        names = [literal(name) for name, _ in ranked][::-1]  # drawn by the categorical axis
        values = [w for _, w in ranked][::-1]
        ax.barh(names, values, color="#4c72b0")
        ax.set_xlabel(label)
        title = f"{self.study}: {what} ({self.method}, {self.n_trials} trials)"
        if self.residual_variance is not None:
            title += f"\nresidual variance {self.residual_variance:.3g}"
        ax.set_title(title, fontsize=10)
        return self._save(fig, path)

    def _prior_plot(self):
        from matplotlib.figure import Figure
        from scipy.stats import gamma

        names = list(self.prior or {})
        fig = Figure(figsize=(6.5, 0.45 * max(len(names), 3) + 1.4))
        ax = fig.subplots()
        for i, name in enumerate(names):
            p = self.prior[name]
            low, high = gamma(p["prior_shape"], scale=p["prior_mean"] / p["prior_shape"]).ppf(
                [0.05, 0.95]
            )
            ax.plot([low, high], [i, i], color="#9db4d6", lw=6, solid_capstyle="butt")
            ax.plot([p["prior_mean"]], [i], "|", color="#4c72b0", ms=14, mew=2)
            if p.get("fitted") is not None:
                ax.plot([p["fitted"]], [i], "o", color="#dd8452")
        ax.set_yticks(range(len(names)), names)
        ax.set_xscale("log")
        ax.set_xlabel("lengthscale (unit cube): prior 5-95% and mean (blue), fitted (orange)")
        ax.set_title(f"{self.study}: MPHD priors, {self.n_trials} trials", fontsize=10)
        return fig

    @staticmethod
    def _save(fig, path: str | Path | None):
        from headstart._display import literal_text

        literal_text(fig)
        fig.tight_layout()
        if path is not None:
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, dpi=120)
        return fig
