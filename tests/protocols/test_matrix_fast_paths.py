"""The item matrix's whole-matrix paths (exact means over every column at once, the bootstrap's cell
counts for every column in one bincount per row block) give exactly what their column-by-column
forms give, which stay for matrices whose denominators or cells are too many."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from protocols.kit import matrix as matrix_module
from protocols.kit.matrix import ItemMatrix, bootstrap_means


def _random_matrix(rng: np.random.Generator, *, rows: int, kind: str) -> ItemMatrix:
    m = int(rng.integers(1, 9))
    if kind == "small":  # STATUS-like: a few denominators, int8 cells
        den = rng.choice(np.array([0, 1, 2, 6], dtype=np.int8), size=(rows, m))
        num = (rng.random((rows, m)) * (den + 1)).astype(np.int8)
    elif kind == "negative":  # numerators below zero, a column never counted, a constant column
        den = rng.integers(0, 4, size=(rows, m))
        num = rng.integers(-5, 3, size=(rows, m))
        den[:, 0] = 0
        num[:, -1] = 3
    else:  # "large": denominators above SMALL_DEN and wide numerators (the per-column forms)
        den = rng.integers(0, 3000, size=(rows, m))
        num = rng.integers(-4000, 4000, size=(rows, m))
    return ItemMatrix(keys=tuple(f"k{j}" for j in range(m)), num=num, den=den)


@pytest.mark.parametrize("kind", ["small", "negative", "large"])
def test_exact_means_equal_the_column_by_column_sums(kind):
    rng = np.random.default_rng(11)
    for trial in range(200):
        matrix = _random_matrix(rng, rows=int(rng.integers(0, 60)), kind=kind)
        assert matrix.exact_means() == matrix._exact_means_by_column(), trial


def test_exact_means_are_exact_fractions():
    # Thirds and sixths: a float sum would not give 1/2 exactly.
    den = np.array([[3, 6], [3, 6], [3, 0], [0, 6]], dtype=np.int8)
    num = np.array([[1, 1], [2, 5], [1, 4], [9, 3]], dtype=np.int8)
    means = ItemMatrix(keys=("a", "b"), num=num, den=den).exact_means()
    assert means == {"a": Fraction(4, 9), "b": Fraction(1, 2)}
    assert ItemMatrix(keys=("a",), num=np.zeros((3, 1)), den=np.zeros((3, 1))).exact_means() == {"a": None}


@pytest.mark.parametrize("kind", ["small", "negative"])  # "large" takes the per-column path either way
def test_bootstrap_cells_counted_together_equal_column_by_column(kind, monkeypatch):
    rng = np.random.default_rng(5)
    for trial in range(3):
        matrix = _random_matrix(
            rng, rows=int(rng.integers(matrix_module.COMPRESS_FROM, matrix_module.ROW_BLOCK + 20_000)), kind=kind
        )
        together = [tuple(map(np.copy, c[:2])) + c[2:] for c in matrix_module._column_cells(matrix)]
        fast = bootstrap_means(matrix, n_boot=50, seed=trial)
        monkeypatch.setattr(matrix_module, "CELL_TABLE_MAX", 0)  # every column on its own
        alone = list(matrix_module._column_cells(matrix))
        slow = bootstrap_means(matrix, n_boot=50, seed=trial)
        monkeypatch.undo()
        assert len(together) == len(alone) == matrix.num.shape[1]
        for (cells_a, counts_a, span_a, min_a), (cells_b, counts_b, span_b, min_b) in zip(together, alone):
            assert (span_a, min_a) == (span_b, min_b)
            assert np.array_equal(cells_a, cells_b) and np.array_equal(counts_a, counts_b)
            assert int(counts_a.sum()) == matrix.num.shape[0]
        assert np.array_equal(fast, slow, equal_nan=True), (kind, trial)


def test_a_negative_denominator_is_refused_not_counted_as_another_cell():
    den = np.ones((matrix_module.COMPRESS_FROM, 2), dtype=np.int64)
    den[7, 1] = -1
    matrix = ItemMatrix(keys=("a", "b"), num=np.ones_like(den), den=den)
    with pytest.raises(ValueError, match="denominators"):
        bootstrap_means(matrix, n_boot=10)
