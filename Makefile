# Everything a fresh machine needs, in order: Docker engine, venv with all extras, sandbox image.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
EXTRAS ?= dev,train,serve,report,ray,docs

.PHONY: setup docker venv image browser docs demo test test-long test-fast lint bench redteam fairness redteam-search differential mutant-agreement mutation real-suites mined-suites etai-js train-set chaos clean

setup: docker venv image

docker:
	bash scripts/ensure-docker

venv: $(VENV)/.installed-$(subst /,_,$(EXTRAS))

$(VENV)/.installed-$(subst /,_,$(EXTRAS)): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	touch $@

image: docker venv
	$(BIN)/etai image build

# Debian's chromium, for the test that opens an `etai report` page in a real browser.
browser:
	bash scripts/ensure-browser

# The documentation site from docs/ into runs/site/, strict: a broken link or a missing page fails
# (tests/docs/ builds it in make test too).
docs: venv
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict

# The main job: replay the bundled suite with the reference agent and the do-nothing agent.
demo: setup
	$(BIN)/etai run --suite jest-bugfix --agent oracle --agent noop --out runs/demo

# pytest's exit 5 ("no tests ran") is a failure, never a pass.
test: setup browser
	$(BIN)/etai sandbox prune
	$(BIN)/python -m pytest -q --durations=30; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "no tests ran: failing" >&2; exit 1; fi; exit $$rc

# ruff with the rules pyproject.toml names; .ci/run runs it after the tests.
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The tests kept out of make test for CI time (ETAI_LONG=1; a quarter of an hour on 2 busy cores):
# the in-training evaluation's budget, rank sharding, FSDP generation (lockstep and gathered) and
# async mode, the FSDP export read back and RoPE logits under FSDP bf16 (make test launches FSDP
# once: the wrap and global clipping), a NODE_PATH project's history mined and replayed (make test
# builds one); then the whole bundled suite through a two-node Ray cluster with a node killed (make
# test runs four sessions).
test-long: setup
	ETAI_LONG=1 $(BIN)/python -m pytest -q \
	  tests/finetune/test_callback_budget.py tests/finetune/test_callback_shard.py \
	  tests/finetune/test_callback_async.py \
	  tests/finetune/test_fsdp.py::test_two_rank_fsdp_evaluates_every_shard \
	  tests/finetune/test_fsdp.py::test_two_rank_fsdp_export_loads_back_with_the_trained_logits \
	  tests/finetune/test_fsdp_precision.py::test_rope_logits_past_4k_match_fp32_under_fsdp_bf16 \
	  tests/harness/test_jest_config.py::test_a_node_path_history_is_mined_and_replays
	ETAI_RAY_WHOLE_SUITE=1 $(BIN)/python -m pytest -q tests/harness/test_executor_ray.py -k two_nodes

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

bench: setup
	$(BIN)/python bench/jest_step.py

# Every red-team technique on every session (make test runs the core ones, each on a rotating three
# of the sessions: tests/harness/test_tamper.py SLICE); about 70 minutes on 2 quiet cores, an hour
# of it the reference after every technique in that technique's container.
redteam: setup
	ETAI_REDTEAM=all $(BIN)/python -m pytest -q -s tests/harness/test_tamper.py

# The fairness corpus whole (tests/harness/fairness_corpus.py): every honest fix, written from the
# task alone and shaped unlike the reference, replayed; none may be special_cased. make test replays
# a slice; run this after any change to the held-out split or the verdict. A few minutes.
fairness: setup
	ETAI_FAIRNESS=all $(BIN)/python -m pytest -q tests/harness/test_fairness.py

# A randomised search: cheats composed from primitives (when x how x what x follow-up), each a full
# episode on a bundled session; resumable, report in runs/redteam-search/report.json; exit 1 on a
# false green. ARGS="--cheats 300 --seed 7 --workers 2 --only fd-forge".
# Every speed path (harness/base/speed.py) off in turn against all of them on, the same episodes:
# the reference, noop and the core red-team techniques on the bundled suite, and edits of real
# projects' suites given with --suite; exit 1 on any verdict that differs. Report in
# runs/differential/report.json; make test runs a seeded slice (tests/scripts/test_differential.py).
# ARGS="--suite runs/real-suites/fastest-validator/suite --edits 6 --techniques all".
differential: setup
	$(BIN)/python scripts/differential.py $(ARGS)

# The selected graded run against a whole one on mutants of real projects' sources (#63): 1,000
# mutants over the suites given, each written over its session's fixed workspace and verified both
# ways; exit 1 on a verdict that differs. Report in runs/mutant-agreement/report.json; make test
# runs the bundled slice (tests/scripts/test_mutant_agreement.py). Hours on 2 cores; the suites of
# `make real-suites`: ARGS="--suite runs/real-suites/dayjs --suite runs/real-suites/commander".
mutant-agreement: setup
	$(BIN)/python scripts/mutant_agreement.py $(ARGS)

redteam-search: setup
	$(BIN)/python scripts/redteam_search.py $(ARGS)

# Mutation testing of the scoring and reward modules (#12) in scratch copies, never the tree;
# `make mutation MUTATE=harness/runs/metrics.py` for one module, ARGS=--quick for the CI slice.
mutation: venv
	$(BIN)/python scripts/mutation $(MUTATE) $(ARGS)

# Suites built by `etai suite build` from the six real projects of ../shared/realrepos, each replayed
# with oracle and noop; report in runs/real-suites/report.md. Hours on 2 cores; ARGS="--max 10 --only redux".
real-suites: setup
	$(BIN)/python scripts/real_suites.py $(ARGS)

# `etai suite mine` over the histories of ../shared/realrepos (bundles in ../shared/realrepos-history,
# others with ARGS="--repo NAME=PATH"), 400 first-parent commits back from each corpus commit,
# replayed with oracle and noop; report in runs/mined-suites/report.md. ARGS="--only commander".
mined-suites: setup
	$(BIN)/python scripts/mined_suites.py $(ARGS)

# The etai-js manifest (docs/guides/etai-js.md) grown from mines of the histories at hand (5 sessions
# a project unless ARGS="--max N") into its draft version, then verified as a user gets it: fetched
# from the bundles and replayed with oracle and noop; then the bundled slice's test on every session.
etai-js: setup
	$(BIN)/python scripts/etai_js.py $(ARGS)
	ETAI_JS=all $(BIN)/python -m pytest -q tests/harness/test_suite_fetch_slice.py

# The data of finetune/configs/agent-8xa100.yaml: the six projects' suites built (no replay) into
# runs/real-suites/, dayjs with wider caps (up to 20 mutants a file, 4 a function). Builds resume;
# about an hour on 2 shared cores. The config's dry run: python -m finetune.epoch CONFIG --ranks 8.
train-set: setup
	$(BIN)/python scripts/real_suites.py --no-replay --only redux --only dinero --only commander --only fastest-validator
	$(BIN)/python scripts/real_suites.py --no-replay --only dayjs --max 600 --per-file 20 --per-function 4
	$(BIN)/python scripts/real_suites.py --no-replay --only luxon --max 40

# The chaos soak (#36): a real-project suite (fastest-validator from ../shared/realrepos, 68
# sessions, built into runs/real-suites once) under 300 seeded faults of every kind must end with
# exactly a clean run's rows, nothing left behind; report in runs/chaos/. ARGS="--seed 2";
# make test runs the short one (7 bundled sessions, 18 faults: tests/scripts/test_chaos.py).
# The bundled suite whole: ARGS="--suite jest-bugfix --faults 30 --seed 7".
chaos: setup
	$(BIN)/python scripts/chaos $(ARGS)

clean:
	-$(BIN)/etai sandbox prune --all
	rm -rf runs .pytest_cache
