"""Reports of the pretrained-model study (:mod:`meanfield.studies.pretrained_nlp`).

Reads the finished runs (``<out>/softmax/runs/*.nc`` and ``<out>/linearized/runs/*.nc``: a
partial study is reported as far as it goes) and writes ``<out>/report.md`` and
``<out>/results.csv``:

* the TF-IDF + logistic-regression sanity bar on the same training examples (scikit-learn,
  ``C`` by 5-fold CV on a grid whose edges are reported if chosen);
* per data set and variant, mean and 95 % t-interval over seeds of the clean accuracy, the
  noisy accuracy, ECE, the accuracy right after linearizing (before fine-tuning), and the
  fraction of the softmax model's accuracy recovered (paired by seed);
* what learning Omega changed, per learned variant: the attention's total variation to
  softmax and the deployed kernel's held-out centred alignment, before and after;
* paired differences Kernel − vanilla, Kernel − Hedgehog-loss (Ω only) per feature map, the
  controls, and Kernel (each feature map) − published Hedgehog where a data set runs it,
  with 95 % t-intervals and Holm-adjusted p-values over the whole planned family (every data
  set x comparison of the configuration; those without two paired seeds yet count as p = 1).

It also writes ``<out>/readme_tables.md``: the tables of ``paper_repro/nlp_pretrained/README.md``
(:func:`readme_tables`), each rounded once from the unrounded results, between the markers
``<!-- report-table:NAME -->`` and ``<!-- /report-table:NAME -->`` that
:func:`update_readme_tables` replaces in the README.  After new runs, regenerate the report
(with the data sets, so that it keeps the TF-IDF bars) and the README's tables::

    python -c "from meanfield.studies.pretrained_nlp_report import *; update_readme_tables(
        'paper_repro/nlp_pretrained/README.md', write_report('paper_repro/nlp_pretrained/'
        'results/full', data_dir='../shared/data')['readme_tables'])"

Earlier names are read as the current ones: a configuration's method ``hedgehog`` and a run's
variant ``hedgehog-<X>`` are the Ω-only Hedgehog, reported as ``hedgehog-loss-<X>``
(:func:`meanfield.studies.pretrained_nlp.canonical_variant`).

Examples
--------
>>> from meanfield.studies.pretrained_nlp_report import t_interval
>>> m, lo, hi = t_interval([1.0, 2.0, 3.0])
>>> m, round(lo, 3), round(hi, 3)
(2.0, -0.484, 4.484)
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import xarray as xr

from ..errors import InputError
from ..stats import holm, paired_family, t_interval  # defined in meanfield.stats, re-exported
from .pretrained_nlp import canonical_variant, dataset_methods, split_variant, variants

__all__ = [
    "t_interval",
    "holm",
    "load_runs",
    "tfidf_bar",
    "write_report",
    "readme_tables",
    "update_readme_tables",
]


def load_runs(out: Path) -> list[dict]:
    """One dict per finished run of the current configuration: the grid point and every
    scalar result.  ``<stage>/current.json`` (written by the study) names each data set's
    current configuration digest; runs of other settings in the same folder are left out.

    Examples
    --------
    >>> import tempfile
    >>> load_runs(Path(tempfile.mkdtemp()))  # nothing finished yet
    []
    """
    rows = []
    for stage in ("softmax", "linearized"):
        try:
            current = json.loads((out / stage / "current.json").read_text())
        except (OSError, ValueError):
            current = None  # a folder from before current.json: every run
        for path in sorted((out / stage / "runs").glob("*.nc")):
            try:
                with xr.open_dataset(path, engine="h5netcdf") as ds:
                    name = str(ds.attrs["sweep_dataset"])
                    if current is not None and ds.attrs.get("sweep_config_digest") != current.get(
                        name
                    ):
                        continue
                    row = {k: float(ds[k].values) for k in ds.data_vars}
                    variant = str(ds.attrs.get("sweep_variant", "softmax"))
                    row.update(
                        stage=stage,
                        dataset=str(ds.attrs["sweep_dataset"]),
                        seed=int(ds.attrs["sweep_seed"]),
                        # the current name of a variant recorded under an earlier one
                        variant=variant if variant == "softmax" else canonical_variant(variant),
                    )
            except (OSError, KeyError, ValueError, InputError):
                continue  # a run being written, or set aside; a variant of no known name
            rows.append(row)
    return rows


def tfidf_bar(cfg: dict, dataset: str, data_dir) -> dict:
    """TF-IDF (1-2-grams) + logistic regression on the study's training examples.

    Examples
    --------
    >>> import json
    >>> from meanfield.studies.pretrained_nlp import FIXTURES, TINY_CONFIG, check_config
    >>> cfg = check_config(json.load(open(TINY_CONFIG)))
    >>> bar = tfidf_bar(cfg, "rotten_tomatoes", FIXTURES)
    >>> 0.0 <= bar["accuracy"] <= 1.0, bar["n_train"]
    (True, 12)
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    from ..attention.baselines import logistic_by_cv
    from ..attention.data import load_split
    from ..attention.metrics import classification_metrics
    from ..attention.training import validation_indices

    ds = next(d for d in cfg["datasets"] if d["name"] == dataset)
    src = ds.get("source", "auto")
    tr = load_split(ds["task"], ds.get("train_split", "train"), data_dir, source=src)
    ev = load_split(ds["task"], ds.get("eval_split", "test"), data_dir, source=src)
    if ds.get("max_train") and len(tr) > ds["max_train"]:
        pick = np.random.default_rng(cfg["data_seed"]).permutation(len(tr))[: ds["max_train"]]
        tr = tr.subset(np.sort(pick))
    held = validation_indices(np.asarray(tr.labels), cfg["validation_fraction"], cfg["data_seed"])
    tr = tr.subset(np.setdiff1d(np.arange(len(tr)), held))  # what the networks train on
    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True).fit(list(tr.text_a))
    Cs = [0.03, 0.1, 0.3, 1, 3, 10, 30, 100, 300]
    # C by 5-fold CV on the log loss, then refitted to convergence (see attention.baselines)
    clf, C, on_edge = logistic_by_cv(vec.transform(list(tr.text_a)), np.asarray(tr.labels), Cs)
    probs = clf.predict_proba(vec.transform(list(ev.text_a)))
    rec = classification_metrics(np.asarray(ev.labels), probs)
    rec.update(C=C, C_on_edge=on_edge, n_train=len(tr))
    return rec


def _fmt(m, lo, hi, d=4) -> str:
    if not np.isfinite(m):
        return "—"
    if not np.isfinite(lo):
        return f"{m:.{d}f}"
    return f"{m:.{d}f} [{lo:.{d}f}, {hi:.{d}f}]"


def _paired(rows, dataset, a, b, metric="clean_accuracy"):
    """Per-seed differences a − b (seeds where both are done)."""
    va = {r["seed"]: r[metric] for r in rows if r["dataset"] == dataset and r["variant"] == a}
    vb = {r["seed"]: r[metric] for r in rows if r["dataset"] == dataset and r["variant"] == b}
    seeds = sorted(set(va) & set(vb))
    return np.array([va[s] - vb[s] for s in seeds])


def _comparisons(cfg, ds=None) -> list[tuple[str, str, str]]:
    """The planned paired comparisons ``(a, b, label)`` of data set ``ds``: per feature map
    Kernel − vanilla and Kernel − Hedgehog-loss, the controls, then (where the data set runs
    it) Kernel on each feature map − the published Hedgehog."""
    methods = dataset_methods(cfg, ds)
    out = []
    for f in cfg["features"]:
        if "kernel" in methods and "vanilla" in methods:
            out.append((f"kernel-{f}", f"vanilla-{f}", "Kernel − vanilla"))
        if "kernel" in methods and "hedgehog-loss" in methods:
            out.append((f"kernel-{f}", f"hedgehog-loss-{f}", "Kernel − Hedgehog-loss (Ω only)"))
    ctl = cfg.get("controls") or {}
    for k in ctl.get("kinds", []):
        out.append((f"kernel-{ctl['feature']}", f"{k}-{ctl['feature']}", f"Kernel − {k}"))
    if "kernel" in methods and "hedgehog-published" in methods:
        for f in cfg["features"]:
            out.append(
                (f"kernel-{f}", "hedgehog-published-hedgehog", "Kernel − published Hedgehog")
            )
    return out


def write_report(out, data_dir=None) -> dict:
    """Write ``report.md``, ``results.csv`` and ``readme_tables.md`` under ``out``; returns
    the table rows, the number of comparisons computed and planned, and the README's tables
    (name -> markdown, :func:`readme_tables`).

    Examples
    --------
    >>> import json, tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> _ = (out / "config.json").write_text(json.dumps({"name": "x", "datasets": []}))
    >>> write_report(out)
    {'table': [], 'comparisons': 0, 'planned': 0, 'readme_tables': {}}

    See Also
    --------
    readme_tables : the README's tables, also written to ``<out>/readme_tables.md``.
    """
    out = Path(out)
    cfg = json.loads((out / "config.json").read_text())
    rows = load_runs(out)
    with open(out / "results.csv", "w", newline="") as fh:
        keys = sorted({k for r in rows for k in r})
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    lines = [f"# Pretrained-model study: {cfg['name']}", "", cfg.get("description", ""), ""]
    table = []
    for ds in cfg["datasets"]:
        name = ds["name"]
        mine = [r for r in rows if r["dataset"] == name]
        if not mine:
            continue
        lines += [f"## {name}", ""]
        if data_dir is not None:
            bar = tfidf_bar(cfg, name, data_dir)
            edge = " (C on the grid's edge)" if bar["C_on_edge"] else ""
            lines += [
                f"TF-IDF + LR bar (same {bar['n_train']} training examples, C = {bar['C']:g}"
                f"{edge}): accuracy {bar['accuracy']:.4f}, ECE {bar['ece']:.4f}.",
                "",
            ]
        soft = {r["seed"]: r["clean_accuracy"] for r in mine if r["variant"] == "softmax"}
        budget = float(cfg.get("train", {}).get("max_epochs", np.inf))
        lines += [
            "| variant | seeds | accuracy | noisy accuracy | ECE | after linearizing | "
            "recovered (of softmax) | best epoch at the budget's end |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for variant in ["softmax"] + variants(cfg, ds):
            rs = [r for r in mine if r["variant"] == variant]
            if not rs:
                continue
            acc = t_interval([r["clean_accuracy"] for r in rs])
            noisy = t_interval([r["noisy_accuracy"] for r in rs])
            ece = t_interval([r["clean_ece"] for r in rs])
            lin = t_interval([r.get("linearized_accuracy", np.nan) for r in rs])
            rec = t_interval(
                # a softmax run of accuracy 0 recovers nothing measurable: left out, not 1/0
                [r["clean_accuracy"] / soft[r["seed"]] for r in rs if soft.get(r["seed"], 0) > 0]
            )
            # a run whose best validation loss came at its last evaluation was stopped by the
            # epoch budget, not by early stopping: it may not have converged
            at_end = sum(float(r.get("best_epoch", np.nan)) >= budget for r in rs)
            lines.append(
                f"| {variant} | {len(rs)} | {_fmt(*acc)} | {_fmt(*noisy)} | {_fmt(*ece)} | "
                f"{_fmt(*lin)} | {_fmt(*rec, d=3)} | {at_end} of {len(rs)} |"
            )
            table.append({"dataset": name, "variant": variant, "n": len(rs), "accuracy": acc[0]})
        lines.append("")
        lines += _learning_lines(mine, variants(cfg, ds))
    # the family of paired comparisons, Holm-corrected over every *planned* comparison (every
    # data set x comparison of the configuration): one not yet computable (< 2 paired seeds)
    # counts as p = 1, so a partial study is never corrected for fewer claims than it makes
    comps, planned = {}, 0
    for ds in cfg["datasets"]:
        for a, b, label in _comparisons(cfg, ds):
            planned += 1
            d = _paired(rows, ds["name"], a, b)
            if len(d) >= 2:
                comps[(ds["name"], a, b, label)] = d
    family = paired_family(comps, planned=planned) if comps else []
    if comps:
        lines += [
            "## Paired differences (accuracy, by seed)",
            "",
            f"95 % t-intervals; Holm-adjusted p and Bonferroni simultaneous 95 % intervals over "
            f"the {planned} planned comparisons ({planned - len(comps)} not yet computable, "
            "counted as p = 1).",
            "",
            "| data set | comparison | seeds | difference | Bonferroni interval | p | Holm p |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in family:
            name, a, b, label = r["label"]
            lines.append(
                f"| {name} | {a} − {b} ({label}) | {r['k']} | "
                f"{_fmt(r['mean'], r['lo'], r['hi'])} | [{r['lo_bonf']:.4f}, {r['hi_bonf']:.4f}] "
                f"| {r['p']:.3g} | {r['p_holm']:.3g} |"
            )
        lines.append("")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    tables = readme_tables(cfg, rows, family)
    (out / "readme_tables.md").write_text(
        "".join(f"{_OPEN.format(k)}\n\n{v}\n\n{_CLOSE.format(k)}\n\n" for k, v in tables.items())
    )
    return {
        "table": table,
        "comparisons": len(comps),
        "planned": planned,
        "readme_tables": tables,
    }


# what each way of learning Omega records about the feature map before and after learning it
# (before: the prior draw; measured on held-out sequences): (label, before key, after key)
_LEARNING = (
    ("TV to softmax attention", "phase_a_tv_to_softmax_before", "phase_a_tv_to_softmax_after"),
    ("TV to softmax attention", "hedgehog_tv_before", "hedgehog_tv_after"),
    ("centred alignment (held out)", "phase_a_align_heldout_before", "phase_a_align_heldout_after"),
)


def _learning_lines(rows, order) -> list[str]:
    """Markdown lines: per learned variant, mean and 95 % t-interval over seeds of what its
    learning step changed (attention's total variation to softmax, the deployed kernel's
    held-out centred alignment) and its wall time; descriptive, no claim (no correction)."""
    lines = []
    for variant in order:
        rs = [r for r in rows if r["variant"] == variant]
        for label, before, after in _LEARNING:
            if not rs or not all(before in r and after in r for r in rs):
                continue
            if not lines:
                lines = [
                    "What learning Omega did (held-out sequences; mean [95 % t-interval] over "
                    "seeds; before = the prior draw):",
                    "",
                    "| variant | seeds | measure | before | after | median learning s |",
                    "| --- | --- | --- | --- | --- | --- |",
                ]
            b = t_interval([r[before] for r in rs])
            a = t_interval([r[after] for r in rs])
            secs = np.median([r.get("learn_seconds", np.nan) for r in rs])
            lines.append(
                f"| {variant} | {len(rs)} | {label} | {_fmt(*b, d=3)} | {_fmt(*a, d=3)} | "
                f"{secs:.0f} |"
            )
    return lines + [""] if lines else []


# ---------------------------------------------------------------------------------------------
# the README's tables (paper_repro/nlp_pretrained/README.md), rounded once from the unrounded
# results: a number rounded by the report and then again by hand can land one unit off in its
# last digit (-0.8486 -> -0.85 -> -0.9 points), so the README includes these tables verbatim
# ---------------------------------------------------------------------------------------------

_OPEN = "<!-- report-table:{} -->"
_CLOSE = "<!-- /report-table:{} -->"
_MARKED = re.compile(
    r"^(?P<indent>[ \t]*)<!-- report-table:(?P<name>[\w.-]+) -->[ \t]*\n"
    r"(?P<body>.*?)"
    r"^[ \t]*<!-- /report-table:(?P=name) -->[ \t]*$",
    re.M | re.S,
)
_OPENING = re.compile(r"^[ \t]*<!-- report-table:([\w.-]+) -->", re.M)
_DATASET_NAMES = {"rotten_tomatoes": "Rotten Tomatoes", "sst2": "SST-2", "qqp": "QQP"}
_FEATURE_NAMES = {"favor": "FAVOR+", "porf-softplus": "PORF-softplus"}
#: the README's names of the methods
_METHOD_NAMES = {
    "vanilla": "vanilla",
    "kernel": "Kernel",
    "hedgehog-loss": "Hedgehog-loss",
    "hedgehog-published": "published Hedgehog",
}
_CONTROL_NOTES = {
    "redraw": ("redraw", "another prior draw"),
    "lam0": ("λ = 0", "Kernel without repulsion"),
}
#: the study's encoder (all-MiniLM-L6-v2), fine-tuned with softmax attention
_SOFTMAX_LABEL = "softmax MiniLM"


def _variant_label(variant: str) -> str:
    """The README's name of a variant: ``vanilla FAVOR+``, ``control: λ = 0 FAVOR+ (...)``."""
    if variant == "softmax":
        return _SOFTMAX_LABEL
    method, feature = split_variant(variant)
    if method in _CONTROL_NOTES:
        name, note = _CONTROL_NOTES[method]
        return f"control: {name} {_FEATURE_NAMES.get(feature, feature)} ({note})"
    if method == "hedgehog-published":  # brings its own map: no feature map to name
        return _METHOD_NAMES[method]
    return f"{_METHOD_NAMES.get(method, method)} {_FEATURE_NAMES.get(feature, feature)}"


def _points(x: float) -> str:
    """An accuracy difference in points (x 100), signed, one decimal, typographic minus."""
    return f"{100 * x:+.1f}".replace("-", "−")


def _p_short(p: float) -> str:
    """A p-value to three decimals without trailing zeros (``1``, ``0.19``, ``0.033``)."""
    if p < 0.0005:
        return "< 0.001"
    return f"{p:.3f}".rstrip("0").rstrip(".")


def readme_tables(cfg: dict, rows: list[dict], family: list[dict]) -> dict[str, str]:
    """The README's tables of the pretrained-model study, as markdown, each number rounded
    once from the unrounded results.

    Per data set with finished runs:

    * ``variants-<data set>``: per variant, the number of seeds, the accuracy (mean and 95 %
      t-interval over seeds, 4 decimals), the accuracy right after linearizing (mean) and the
      fraction of the softmax model's accuracy recovered (paired by seed, 3 decimals);
    * ``paired-<data set>``: Kernel − vanilla, Kernel − Hedgehog(-loss) and, where run,
      Kernel − published Hedgehog (rows) per feature map (columns), in points of accuracy:
      mean, 95 % t-interval, Bonferroni simultaneous interval and Holm-adjusted p over the
      planned family; ``paired-<data set>-no-bonferroni``: the same without the Bonferroni
      interval.  A row none of whose comparisons has two paired seeds yet is left out, a
      cell without them reads "—".  The controls are not tabulated (the README states them).

    Parameters
    ----------
    cfg : dict
        The study's configuration (``<out>/config.json``).
    rows : list of dict
        The finished runs, :func:`load_runs`.
    family : list of dict
        The paired comparisons, :func:`meanfield.stats.paired_family` of the differences
        keyed ``(data set, a, b, label)`` (as :func:`write_report` computes them).

    Returns
    -------
    dict
        Table name -> markdown table (lines joined by newlines, no trailing newline), in the
        configuration's order of data sets.

    Examples
    --------
    >>> cfg = {"datasets": [{"name": "sst2"}], "features": ["favor"], "methods": ["vanilla"]}
    >>> rows = [{"dataset": "sst2", "variant": v, "seed": s, "clean_accuracy": a,
    ...          "linearized_accuracy": 0.7} for v, s, a in [("softmax", 0, 0.8),
    ...          ("softmax", 1, 0.9), ("vanilla-favor", 0, 0.76), ("vanilla-favor", 1, 0.81)]]
    >>> print(readme_tables(cfg, rows, [])["variants-sst2"])
    | SST-2 variant | seeds | accuracy | after linearizing | recovered of softmax |
    | --- | --- | --- | --- | --- |
    | softmax MiniLM | 2 | 0.8500 [0.2147, 1.4853] | | 1.000 |
    | vanilla FAVOR+ | 2 | 0.7850 [0.4673, 1.1027] | 0.7000 | 0.925 [0.607, 1.243] |

    See Also
    --------
    write_report : writes them to ``<out>/readme_tables.md`` with the report.
    update_readme_tables : puts them into the README between markers.
    """
    by_label = {r["label"]: r for r in family}
    tables = {}
    for ds in cfg["datasets"]:
        name = ds["name"]
        mine = [r for r in rows if r["dataset"] == name]
        if not mine:
            continue
        title = _DATASET_NAMES.get(name, name)
        soft = {r["seed"]: r["clean_accuracy"] for r in mine if r["variant"] == "softmax"}
        lines = [
            f"| {title} variant | seeds | accuracy | after linearizing | recovered of softmax |",
            "| --- | --- | --- | --- | --- |",
        ]
        for variant in ["softmax"] + variants(cfg, ds):
            rs = [r for r in mine if r["variant"] == variant]
            if not rs:
                continue
            acc = t_interval([r["clean_accuracy"] for r in rs])
            rec = t_interval(
                [r["clean_accuracy"] / soft[r["seed"]] for r in rs if soft.get(r["seed"], 0) > 0]
            )
            if variant == "softmax":  # recovers all of itself; never linearized
                lines.append(f"| {_variant_label(variant)} | {len(rs)} | {_fmt(*acc)} | | 1.000 |")
                continue
            lin = np.mean([r.get("linearized_accuracy", np.nan) for r in rs])
            lines.append(
                f"| {_variant_label(variant)} | {len(rs)} | {_fmt(*acc)} | "
                f"{_fmt(lin, np.nan, np.nan)} | {_fmt(*rec, d=3)} |"
            )
        tables[f"variants-{name}"] = "\n".join(lines)

        # the paired comparisons that have a feature map of the configuration (not controls)
        grid: dict[str, dict[str, dict]] = {}
        for a, b, label in _comparisons(cfg, ds):
            method_a, feature = split_variant(a)
            method_b, _ = split_variant(b)
            if method_b in _CONTROL_NOTES:
                continue
            row = f"{_METHOD_NAMES[method_a]} − {_METHOD_NAMES.get(method_b, method_b)}"
            grid.setdefault(row, {})[feature] = by_label.get((name, a, b, label))
        grid = {k: v for k, v in grid.items() if any(c is not None for c in v.values())}
        if not grid:
            continue
        features = cfg["features"]
        head = [
            f"| {title} | " + " | ".join(_FEATURE_NAMES.get(f, f) for f in features) + " |",
            "| --- |" + " --- |" * len(features),
        ]
        for bonferroni, key in ((True, f"paired-{name}"), (False, f"paired-{name}-no-bonferroni")):
            lines = list(head)
            for row, cells in grid.items():
                out = []
                for f in features:
                    c = cells.get(f)
                    if c is None:
                        out.append("—")
                        continue
                    text = f"{_points(c['mean'])} [{_points(c['lo'])}, {_points(c['hi'])}]"
                    if bonferroni:
                        text += f", [{_points(c['lo_bonf'])}, {_points(c['hi_bonf'])}]"
                    out.append(f"{text}, Holm {_p_short(c['p_holm'])}")
                lines.append(f"| {row} | " + " | ".join(out) + " |")
            tables[key] = "\n".join(lines)
    return tables


def update_readme_tables(readme_path, tables: dict[str, str]) -> list[str]:
    """Replace every table between ``<!-- report-table:NAME -->`` and
    ``<!-- /report-table:NAME -->`` in a markdown file by ``tables[NAME]``.

    The table is indented as its opening marker (a table inside a list item stays inside it)
    and set off from the markers by blank lines; everything outside the markers is kept.  The
    file is rewritten only if a table changed.

    Parameters
    ----------
    readme_path : str or pathlib.Path
        The markdown file, e.g. ``paper_repro/nlp_pretrained/README.md``.
    tables : dict
        Table name -> markdown, as :func:`readme_tables` (or :func:`write_report`'s
        ``readme_tables``) returns them.

    Returns
    -------
    list of str
        The names of the marked tables, in the file's order.

    Raises
    ------
    meanfield.errors.InputError
        A marker whose name is not among ``tables`` (nothing is written), or an opening marker
        without its closing one.

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "README.md"
    >>> _ = path.write_text(
    ...     "Text.\\n\\n- item:\\n  <!-- report-table:t -->\\n  old\\n  <!-- /report-table:t -->\\n"
    ... )
    >>> update_readme_tables(path, {"t": "| a |\\n| --- |\\n| 1 |"})
    ['t']
    >>> print(path.read_text())
    Text.
    <BLANKLINE>
    - item:
      <!-- report-table:t -->
    <BLANKLINE>
      | a |
      | --- |
      | 1 |
    <BLANKLINE>
      <!-- /report-table:t -->
    <BLANKLINE>

    See Also
    --------
    readme_tables : the tables of the pretrained-model study.
    """
    path = Path(readme_path)
    text = path.read_text()
    found = [m.group("name") for m in _MARKED.finditer(text)]
    opened = _OPENING.findall(text)
    if opened != found:
        unclosed = [n for n in opened if n not in found] or opened
        raise InputError(
            f"readme_path: {str(path)!r} opens report-table marker(s) "
            f"{', '.join(sorted(set(unclosed)))} without the closing "
            f"'<!-- /report-table:NAME -->' after it"
        )
    missing = [n for n in found if n not in tables]
    if missing:
        raise InputError(
            f"tables: {str(path)!r} marks table(s) {', '.join(missing)} that are not among the "
            f"tables given ({', '.join(tables) or 'none'})"
        )

    def _replace(m: re.Match) -> str:
        ind, name = m.group("indent"), m.group("name")
        body = "\n".join(ind + line if line else line for line in tables[name].split("\n"))
        return f"{ind}{_OPEN.format(name)}\n\n{body}\n\n{ind}{_CLOSE.format(name)}"

    new = _MARKED.sub(_replace, text)
    if new != text:
        path.write_text(new)
    return found
