"""The character-level data pipeline: the vocabulary, the split of the standard library by file,
and the windows cut from it."""

import pytest

pytest.importorskip("equinox")
pytest.importorskip("optax")

import string  # noqa: E402

import numpy as np  # noqa: E402

from support import text  # noqa: E402


def test_vocabulary_is_printable_ascii_newline_tab_and_unknown():
    assert text.VOCABULARY_SIZE == 98 and text.UNKNOWN == 97
    assert set(text.SYMBOLS) == set(string.printable) - {"\r", "\x0b", "\x0c"}
    assert len(set(text.SYMBOLS)) == len(text.SYMBOLS)


def test_encode_then_decode_returns_printable_text():
    sample = "def f(x):\n\treturn {'a': x ** 2}  # ~`|\\"
    codes = text.encode(sample)
    assert codes.dtype == np.int32 and codes.max() < text.UNKNOWN
    assert text.decode(codes) == sample


def test_other_characters_map_to_unknown_and_carriage_returns_are_dropped():
    codes = text.encode("a\r\nb\u00e9\x0c\U0001f600")
    assert codes.tolist() == [text.encode("a")[0], 95, text.encode("b")[0]] + [text.UNKNOWN] * 3
    assert text.decode(codes) == "a\nb\ufffd\ufffd\ufffd"


def test_split_by_file_is_deterministic_disjoint_and_independent_of_the_other_files():
    files = [f"package{i // 10}/module{i}.py" for i in range(2000)]
    train, held_out = text.split_by_file(files, 0.1)
    assert set(train).isdisjoint(held_out) and len(train) + len(held_out) == len(files)
    assert 0.07 < len(held_out) / len(files) < 0.13
    assert text.split_by_file(files, 0.1) == (train, held_out)
    # a file's side depends on its path alone
    assert text.split_by_file(held_out[:5] + train[:5], 0.1) == (train[:5], held_out[:5])


def test_stdlib_corpus_is_split_by_file_with_codes_in_the_vocabulary():
    corpus = text.load_code_corpus(0.1, max_characters=200_000)
    files = text.stdlib_source_files()
    assert len(files) > 100 and "os.py" in files
    assert set(corpus.train_files).isdisjoint(corpus.held_out_files)
    assert set(corpus.train_files) | set(corpus.held_out_files) == set(files)
    for codes in (corpus.train, corpus.held_out):
        assert len(codes) == 200_000
        assert codes.min() >= 0 and codes.max() < text.VOCABULARY_SIZE
        assert np.mean(codes == text.UNKNOWN) < 1e-3
    assert "import" in text.decode(corpus.held_out[:20_000])


def test_random_windows_are_consecutive_characters():
    codes = np.arange(1000, dtype=np.int32)
    windows = text.random_windows(codes, 16, 50, np.random.default_rng(0))
    assert windows.shape == (50, 16)
    assert np.all(np.diff(windows, axis=1) == 1) and windows.max() < 1000
    with pytest.raises(ValueError, match="no window"):
        text.random_windows(codes[:10], 16, 1, np.random.default_rng(0))
