"""Where things are, for test modules at any depth under tests/ (tests/conftest.py puts tests/ on
sys.path; a module run as a script puts it there itself)."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
