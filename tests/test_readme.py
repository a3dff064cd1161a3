"""The README stays the short map DESIGN.md asks for: at most 200 lines, and every file it links or
names (relative links, benchmarks/*.py, editors/, examples/) exists in the repository."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_readme_is_at_most_200_lines():
    assert len(README.read_text().splitlines()) <= 200


def test_every_file_the_readme_names_exists():
    text = README.read_text()
    links = re.findall(r"\]\(((?!https?:)[^)#]+)\)", text)
    named = re.findall(r"\b((?:benchmarks|editors|examples)/[\w./-]+\.(?:py|md|png|sh))\b", text)
    assert links and named
    missing = [p for p in {*links, *named} if not (ROOT / p).exists()]
    assert not missing, missing
