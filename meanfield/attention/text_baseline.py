"""TF-IDF + logistic regression: the sanity bar a text classifier is measured against.

Word 1-2-grams, ``min_df = 2``, sublinear term frequency; a pair of texts ``(a, b)`` (QQP)
is represented by ``[|a − b|, a ∘ b]`` of its two TF-IDF vectors (symmetric in the two
texts). The inverse penalty ``C`` is chosen by 5-fold cross-validation on the log loss and
the classifier refitted at that ``C`` to convergence
(:func:`meanfield.attention.baselines.logistic_by_cv`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["tfidf_logistic", "tfidf_bar"]


def tfidf_logistic(train, evaluation, Cs, *, pairs: bool = True) -> tuple[dict, float, bool]:
    """Fit TF-IDF + logistic regression on ``train``; its metrics on ``evaluation``.

    Parameters
    ----------
    train, evaluation : meanfield.attention.data.TextClassificationData
        The training examples and those evaluated on.
    Cs : sequence of float
        The grid of inverse penalties (> 0) cross-validated.
    pairs : bool
        Represent a pair task by both texts (``[|a − b|, a ∘ b]``); False: by the first
        text only.

    Returns
    -------
    metrics : dict
        :func:`meanfield.attention.metrics.classification_metrics` on ``evaluation``.
    C : float
        The chosen inverse penalty.
    on_edge : bool
        Whether ``C`` is an end of the grid (the grid may be too narrow).

    See Also
    --------
    meanfield.attention.baselines.logistic_by_cv : the classifier.
    tfidf_bar : on a data set's splits.
    meanfield.attention.metrics.classification_metrics : the metrics returned.

    References
    ----------
    Salton, G. and Buckley, C. (1988). Term-weighting approaches in automatic text
    retrieval. Information Processing & Management 24(5), 513–523.

    Examples
    --------
    >>> from meanfield.attention.data import TextClassificationData
    >>> texts = ["good film", "great good", "bad film", "awful bad", "good great", "bad awful"]
    >>> data = TextClassificationData(texts * 3, None, [1, 1, 0, 0, 1, 0] * 3)
    >>> metrics, C, on_edge = tfidf_logistic(data, data, [0.1, 1.0, 10.0])
    >>> metrics["accuracy"]
    1.0
    """
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer

    from .baselines import logistic_by_cv
    from .metrics import classification_metrics

    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    if pairs and train.is_pair:
        vec.fit(list(train.text_a) + list(train.text_b))

        def feats(d):
            a, b = vec.transform(list(d.text_a)), vec.transform(list(d.text_b))
            return sparse.hstack([abs(a - b), a.multiply(b)]).tocsr()
    else:
        vec.fit(list(train.text_a))

        def feats(d):
            return vec.transform(list(d.text_a))

    clf, C, on_edge = logistic_by_cv(feats(train), np.asarray(train.labels), list(Cs))
    probs = clf.predict_proba(feats(evaluation))
    return classification_metrics(np.asarray(evaluation.labels), probs), C, on_edge


def tfidf_bar(data_dir, data: dict, validation_fraction: float, data_seed: int, Cs, **kw) -> dict:
    """:func:`tfidf_logistic` on a data set's training examples (its split less the
    validation examples every network holds out: :func:`~meanfield.attention.text_data.text_splits`,
    :func:`~meanfield.attention.text_data.training_indices`), evaluated on its evaluation split.

    Returns
    -------
    dict
        The metrics, ``C``, ``C_on_edge`` and ``n_train``.

    See Also
    --------
    tfidf_logistic : the fit and its metrics.
    meanfield.attention.text_data.text_splits : the splits it reads.
    meanfield.attention.text_data.training_indices : the examples held out.
    meanfield.attention.baselines.logistic_by_cv : the classifier.

    References
    ----------
    Salton, G. and Buckley, C. (1988). Term-weighting approaches in automatic text
    retrieval. Information Processing & Management 24(5), 513–523.

    Examples
    --------
    >>> from meanfield.studies.nlp import FIXTURES
    >>> bar = tfidf_bar(FIXTURES, {"task": "sst2"}, 0.2, 0, [0.1, 1.0, 10.0])
    >>> 0.0 <= bar["accuracy"] <= 1.0, bar["n_train"] > 0
    (True, True)
    """
    from .text_data import text_splits, training_indices

    train, evaluation = text_splits(data_dir, data, data_seed)
    train = train.subset(training_indices(train, validation_fraction, data_seed)[0])
    rec, C, on_edge = tfidf_logistic(train, evaluation, Cs, **kw)
    return dict(rec, C=C, C_on_edge=on_edge, n_train=len(train))
