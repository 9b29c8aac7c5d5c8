# The two set-up commands: `make run` and `make test`. Both bootstrap .venv from pyproject.toml.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
ARGS   ?=
CLAUDE_CODE := .clients/node_modules/.bin/claude
CLAUDE_CODE_VERSION := 2.1.332
# The system packages the tests use (redis-server, chromium, npm) are installed with apt-get
# only as root on a system that has it; anyone else is told what to install (their tests skip).
CAN_APT := test "$$(id -u)" = 0 && command -v apt-get >/dev/null

.PHONY: run test quick deep lint typecheck pytest docs rule redis-server chromium bench bench-observe bench-scaling soak fuzz clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Stamps: reinstall only when pyproject.toml changes.
$(VENV)/.run-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $@ $(VENV)/.run-installed

## Run the proxy with its embedded defaults (127.0.0.1:8787 -> https://api.deepseek.com).
run: $(VENV)/.run-installed
	$(BIN)/chatmend serve $(ARGS)

## Install everything and run the whole suite: lint, types, tests.
test: lint typecheck pytest

## The edit loop: the suite without the tests marked `slow` (real processes, load, the largest
## property runs, about 200 tests): under a minute. `make test` still runs everything.
quick: $(VENV)/.test-installed
	$(BIN)/pytest -m "not slow" $(ARGS)

## A long property run (not part of `make test`): every hypothesis test under the `deep` profile,
## ten times the examples (tests/conftest.py), with no per-test timeout.
deep: $(VENV)/.test-installed redis-server
	HYPOTHESIS_PROFILE=deep $(BIN)/pytest -m hypothesis --timeout=0 $(ARGS)

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.test-installed
	$(BIN)/mypy

pytest: $(VENV)/.test-installed redis-server chromium $(CLAUDE_CODE)
	CHATMEND_CLAUDE_BIN=$$(test -x $(CLAUDE_CODE) && echo $(CURDIR)/$(CLAUDE_CODE)) $(BIN)/pytest

## The Claude Code CLI (npm, pinned), which tests/proxy/test_claude_code.py runs through chatmend
## against the strict fake: installed into .clients/ (node and npm from Debian if missing). If the
## registry cannot be reached, that one test is skipped and says so.
$(CLAUDE_CODE):
	@command -v npm >/dev/null || { $(CAN_APT) && apt-get update -qq && apt-get install -y -qq npm >/dev/null; } \
		|| echo "npm not installed (needs root and apt-get): install Node.js 18+ with npm, or the Claude Code CLI test is skipped"
	@npm install --no-audit --no-fund --silent --prefix .clients \
		@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) >/dev/null 2>&1 \
		|| echo "Claude Code CLI not installed (npm failed): its test will be skipped"

## Regenerate docs/rules.md, docs/profiles.md and config.example.yaml's rules section from the
## records (rule, option, profile and check records); tests/test_docs.py fails until they match.
docs: $(VENV)/.run-installed
	$(BIN)/python -m proxy.docs --write

## Scaffold a rule (CONTRIBUTING.md#add-a-rule): make rule NAME=<kebab-name> API=chat|responses|messages
rule: $(VENV)/.test-installed
	$(BIN)/python -m bench.new_rule $(NAME) $(API)

## The reasoning stash's Redis backend is tested against a real redis-server on loopback
## (each test starts its own on a free port, no persistence): installed here if missing.
redis-server:
	@command -v redis-server >/dev/null || { $(CAN_APT) && apt-get update -qq \
		&& apt-get install -y -qq redis-server >/dev/null; } \
		|| echo "redis-server not installed (needs root and apt-get): install Redis (Debian: apt-get install redis-server; macOS: brew install redis) or its tests are skipped"

## The page at /chatmend/ is tested in a real browser: Debian's headless Chromium
## (tests/proxy/test_page_browser.py; skipped, saying why, where it is missing). Installed here
## if missing; without root or apt, says what to install instead of failing.
chromium:
	@command -v chromium >/dev/null || { $(CAN_APT) && apt-get update -qq \
		&& apt-get install -y -qq chromium >/dev/null; } \
		|| echo "chromium not installed (needs root and apt-get): install Chromium (Debian: apt-get install chromium) or the browser test of the page is skipped"

## Benchmarks (not part of `make test`): writes bench/results/tmp/latest.md and latest.png
## (SAVE=1: the committed bench/results/latest.md and latest.png); growing sessions included.
## `make bench PEERS=litellm` adds LiteLLM (own venv in bench/.venvs/); ARGS=--quick for a smoke run.
PEERS ?=
bench: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; } || echo "wrk unavailable: HTTP benchmark skipped"
	$(BIN)/python -m bench.run $(if $(PEERS),--peers $(PEERS)) $(if $(SAVE),--save) $(ARGS)

## The reasoning stash's relay overhead (not part of `make test`): one long SSE stream relayed
## with and without response observation, same run. `make bench-observe ARGS="--chunks 20000"`.
bench-observe: $(VENV)/.test-installed
	$(BIN)/python -m bench.observe $(ARGS)

## The wall-clock side of the linear-work tests (not part of `make test`, whose tests count
## lines instead): each case at n/10 and n messages, the time ratio and the old budget.
## `make bench-scaling ARGS="--only sanitize_body --check"`.
bench-scaling: $(VENV)/.test-installed
	$(BIN)/python -m bench.scaling $(ARGS)

## Load test (not part of `make test`): a fake upstream and `chatmend serve` as real processes,
## 300 clients for 3 minutes; every upstream body verified. `make soak ARGS="--minutes 1 --clients 200"`.
soak: $(VENV)/.test-installed
	$(BIN)/python -m tests.soak $(ARGS)

## Coverage-guided fuzzing of the sanitizer with atheris (not part of `make test`); ARGS go to libFuzzer.
FUZZ_SECONDS ?= 60
fuzz: $(VENV)/.test-installed
	$(BIN)/python -m pip install --quiet atheris
	$(BIN)/python -m tests.fuzz_atheris -max_total_time=$(FUZZ_SECONDS) $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
