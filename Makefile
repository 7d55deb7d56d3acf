# The two commands of the README: `make book` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PIP_INSTALL := $(PY) -m pip install -q -c constraints.txt

.PHONY: book paper paper-dry test nbval install data lint format lab unit notebooks benchmark clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PIP_INSTALL) -e ".[book,dev,flower]"
	touch $@

data: $(STAMP)
	$(PY) -m pflkit fetch fashion-mnist

# Execute every chapter at the `book` profile (re-executed when a chapter, pflkit or data/
# changed; two chapters at a time, one core each) and build the HTML book into _build/html.
# Runs come from the committed store under results/ and nothing is computed: a chapter whose
# store lacks runs says "not computed yet" from its first sweep that needs them.
# `make book FILL=1` computes the missing runs into results/ (hours: see the README);
# `make book FRESH=1` recomputes every run into _build/store/book/ instead.
FRESH ?= 0
FILL ?= 0
book: data
	PFLBOOK_PROFILE=book PFLBOOK_FRESH=$(FRESH) $(PY) tools/build_book.py --profile book --jobs 2 $(if $(filter 1,$(FILL)),--fill,)

# The papers' own experiments (the `paper` profile): each chapter's headline tables on the papers'
# datasets, clients, rounds and seeds, into _build/store/paper/ and the pages into _build/paper/.
# Meant for a machine with a GPU and the datasets: it stops first, in one line, naming what is
# missing (`python -m pflkit paper-check`; PFLBOOK_ALLOW_CPU=1 runs it without a GPU);
# `python -m pflkit paper-cost` estimates its GPU-hours per chapter before it starts.
paper: $(STAMP)
	PFLBOOK_PROFILE=paper $(PY) tools/build_book.py --profile paper

# The paper profile's dry run alone: every chapter at `paper` on stand-in data of the papers' shapes
# (pflkit/fixtures.py), every budget cut to its dry value (profiles.budget), on the CPU (PFLBOOK_DRY=1).
# `make test` runs it beside the chapters at smoke.
paper-dry: $(STAMP)
	$(call timed,chapters at paper-dry (two at a time),PFLBOOK_PROFILE=smoke $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --durations=6 -m paper_dry tests)

# Unit tests (on both cores, one torch thread a worker); every chapter executed once at the `smoke`
# profile (papermill; a sample of each chapter's runs then recomputed whole, identical) and once at
# the `paper` profile's dry run (the papers' datasets as fixtures, every budget at its dry value); the golden
# claims: every chapter executed at `book` from the committed store (nothing computed), its claims
# against tests/golden/ and every verdict word its page prints against its claims (`python
# tools/claims_check.py --update` after a deliberate, reviewed change); the replay check of the
# committed store, a -W book build of the smoke outputs, and the browser check of every built page;
# each step's time.
TIMES := _build/test-times.txt
timed = @s=$$(date +%s); $(2); rc=$$?; t=$$(( $$(date +%s) - s )); echo "[make test] $(1): $$t s"; \
	mkdir -p _build; echo "$$t" >> $(TIMES); exit $$rc

test: data
	$(PY) tools/browser_check.py --install  # Debian's chromium, when missing: part of the install, not of the test time
	@rm -f $(TIMES)
	$(call timed,lint,$(PY) -m ruff check .)
	$(call timed,unit tests (both cores),PFLBOOK_PROFILE=smoke $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --durations=15 -m "not notebooks" tests)
	$(call timed,chapters at smoke and at paper dry (two at a time),PFLBOOK_PROFILE=smoke $(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --durations=18 -m notebooks tests)
	$(call timed,golden claims (every chapter at book from the committed store),$(PY) tools/build_book.py --profile book --no-build --jobs 2 && $(PY) tools/claims_check.py)
	$(call timed,replay check,$(PY) -m pflkit replay)
	$(call timed,book build,PFLBOOK_PROFILE=smoke $(PY) tools/build_book.py --profile smoke --no-execute)
	$(call timed,browser check,$(PY) tools/browser_check.py _build/smoke/_build/html)
	@echo "[make test] test time (the steps above, install excluded): $$(awk '{s += $$1} END {print s}' $(TIMES)) s"

# nbval on the chapters' regression cells: a second execution of every chapter from an empty
# store, its marked outputs compared with the first's (minutes; make test recomputes a sample of
# each chapter's runs instead).
nbval: data
	rm -rf $(CURDIR)/_build/store-nbval
	PFLBOOK_PROFILE=smoke PFLBOOK_STORE_ROOT=$(CURDIR)/_build/store-nbval $(PY) -m pytest -q -p no:cacheprovider --nbval-lax --nbval-current-env _build/smoke/stage/book

unit: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadgroup -m "not notebooks" tests

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check pflkit tests tools benchmarks

format: $(STAMP)
	$(PY) -m ruff format pflkit tests tools benchmarks
	$(PY) -m ruff check --fix .

lab: data
	$(VENV)/bin/jupyter lab book/

benchmark: data
	$(PY) benchmarks/throughput.py

clean:
	rm -rf _build
