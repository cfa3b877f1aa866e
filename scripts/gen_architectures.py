"""Regenerate docs/architectures.md from the fail-closed table in kvplan/sources/hfarch.py
(and the classes vLLM no longer serves, kvplan/engines/vllm/served.py).

    python scripts/gen_architectures.py           # rewrite it
    python scripts/gen_architectures.py --check   # exit 1 when the committed page has drifted
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "docs" / "architectures.md"


def main(argv: list[str] | None = None) -> int:
    from kvplan.engines.vllm.served import removed
    from kvplan.sources.hfarch import architectures_markdown

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with the committed page instead of writing it")
    args = parser.parse_args(argv)
    text = architectures_markdown(removed())
    if args.check:
        if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text:
            print("docs/architectures.md is out of date: run python "
                  "scripts/gen_architectures.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print("wrote docs/architectures.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
