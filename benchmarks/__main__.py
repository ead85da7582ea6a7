"""Entry point: ``python -m benchmarks [--quick] [--db sqlite|postgres|both] ...``."""

from benchmarks.cli import main

raise SystemExit(main())
