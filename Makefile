# Developer shortcuts; each target delegates to a script. `make` alone lists them.
.DEFAULT_GOAL := help
.PHONY: help run test lint bench

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z]+:.*## / {printf "  make %-6s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

run: ## Start the demo site on http://127.0.0.1:8000/ (scripts/demo)
	@scripts/demo

test: ## Lint + tests on SQLite and PostgreSQL (scripts/test; pytest args: make test ARGS="-k engine")
	@scripts/test $(ARGS)

lint: ## ruff check, ruff format --check, mypy, lint-imports
	@scripts/bootstrap.sh && .venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy . && .venv/bin/lint-imports

bench: ## Run the benchmarks (python -m benchmarks)
	@scripts/bootstrap.sh && .venv/bin/python -m benchmarks
