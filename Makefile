# dmbench: every target wraps CMake (presets in CMakePresets.json).
#
#   make test        install missing Debian packages, build (ASan+UBSan), run all tests:
#                    the host tiers (the Ansible sweep tier among them), then the Soft-RoCE
#                    tier in a QEMU guest (test-rxe), then the Ansible cluster tier
#                    (test-ansible-cluster)
#   make test-ansible-cluster  build, then the Ansible cluster tier: three Soft-RoCE hosts
#                    in a QEMU guest, ansible-playbook on this machine
#                    (tests/ansible/cluster-tier.sh; about 6 minutes on an idle 2-core
#                    machine; ANSIBLE_VM_ARGS="-t 1800" etc. go to vm-run.sh)
#   make test-rxe    build, then run the `rxe`-labelled tests and a perftest reference in a
#                    QEMU guest with two Soft-RoCE devices (tests/rxe/; results in
#                    build/$(PRESET)/rxe/; RXE_VM_ARGS="-t 1800" etc. go to vm-run.sh)
#   make figure-10   run experiments/figure-10.yaml on the simulator, then plot it and
#                    regenerate results/README.md (same for every experiments/NAME.yaml:
#                    make offload-qps, make primitives, make figure-6, make figure-7,
#                    make alloc-rate, make offload-model; `make figures` runs them all)
#   make figure-10 PARAMS="keys=300 ..."  the same with parameters overridden (dmbench run
#                    --param, once per word; works with BACKEND= too)
#   make figure-10 BACKEND=sim|ibv INVENTORY=path/to/inventory.ini [FILTER=glob]
#                    the same on a cluster (ansible/, README "On a real cluster"):
#                    site.yml prepares the hosts, figure.yml runs the points (sim: dealt
#                    over the `workers` hosts; ibv: `dmbench mn`/`dmbench cn` on the
#                    `mn`/`cn` hosts), results/NAME/ on this machine, then the plots;
#                    ANSIBLE_ARGS="-e dmb_install=ship" etc. go to both playbooks
#   make calibrate   check every calibration primitive against its source
#   make bench       simulator speed (simulated WRs per wall second, model and bare loop,
#                    per case: microbench/sim_speed_bench.cc) into results/simulator-speed/
#                    (the benchmark's JSON, meta.json, simulator-speed.png/.pdf), then
#                    regenerate results/README.md. Run it on an idle machine: the rates are
#                    wall-clock. BENCH_ARGS="--benchmark_filter=Storm" etc. go to the benchmark
#   make help        this text and the experiments there are
#   make format      clang-format the tree (make test checks it: ctest style.clang_format;
#                    the style label also runs flake8 on plots/ and clang-tidy, .clang-tidy)
#
# Debian 12 packages used (installed by `make deps` when missing):
DEB_PACKAGES := build-essential cmake ninja-build libgtest-dev libgmock-dev libbenchmark-dev \
                libyaml-cpp-dev libcli11-dev libfmt-dev clang-format libibverbs-dev \
                python3 python3-matplotlib python3-pandas flake8 clang-tidy \
                ansible ansible-lint openssh-server libtcmalloc-minimal4

PRESET ?= dev
JOBS ?= $(shell nproc)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: help deps build release test tier-build scale-tests test-rxe rxe-tier test-ansible-cluster ansible-cluster-tier calibrate bench format format-check clean \
        figures runner-build cluster-args

# Every experiment spec is a target: make figure-10, make offload-qps, ...
EXPERIMENTS := $(patsubst experiments/%.yaml,%,$(wildcard experiments/*.yaml))
.PHONY: $(EXPERIMENTS)

deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing missing Debian packages: $$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq --no-install-recommends $$missing; \
	fi

build: deps
	cmake --preset $(PRESET) >/dev/null
	cmake --build --preset $(PRESET) -j $(JOBS)

release: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

# The host tests leave a core idle at times (a long test alone at the end, a
# test waiting on a child): the release binaries the later steps need (scale
# checks, rxe tier, cluster tier) build meanwhile at nice 19, out of their way.
test: build
	@echo "building the release binaries for the later steps at nice 19 (log: build/tier-build.log)"
	@nice -n 19 $(MAKE) --no-print-directory tier-build >build/tier-build.log 2>&1 & tb=$$!; \
	ctest --test-dir build/$(PRESET) --output-on-failure -j $(JOBS) -LE 'rxe|scale'; rc=$$?; \
	wait $$tb || { tail -40 build/tier-build.log; echo "the release build failed (build/tier-build.log)"; exit 1; }; \
	exit $$rc
	$(MAKE) --no-print-directory scale-tests
	$(MAKE) --no-print-directory rxe-tier
	$(MAKE) --no-print-directory ansible-cluster-tier

# The scale checks (ctest label scale) simulate whole figures at two sizes:
# numbers, not memory safety, so on the release build (15-17 s at -j2; 185 s
# sanitized).
scale-tests: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS) --target kv_scale_test
	ctest --test-dir build/release --output-on-failure -j $(JOBS) -L scale

# The Ansible cluster tier (tests/ansible/cluster-tier.sh): a guest of its own
# holds three namespace hosts with their own sshd and Soft-RoCE device, reached
# through forwarded ports; ansible-playbook runs here: site.yml twice,
# figure-10 on ibv, one figure-6 point; results and playbook logs in
# build/$(PRESET)/ansible-cluster/. The guest's hard limit (vm-run.sh -t)
# bounds the tier: 355-406 s on an idle 2-core machine (site.yml 74-87 s twice,
# figure-10's points 119-128 s, the figure-6 point 73-77 s).
ANSIBLE_VM_ARGS ?= -t 900
test-ansible-cluster: build
	$(MAKE) --no-print-directory ansible-cluster-tier

# Ships the release build's dmbench and dmb_micro: the sanitized ones are 175 MB
# a host, which took more than 7 minutes to copy to three hosts under TCG.
ansible-cluster-tier: runner-build
	tests/ansible/cluster-tier.sh $(CURDIR)/build/release $(CURDIR)/build/$(PRESET)/ansible-cluster \
	  $(ANSIBLE_VM_ARGS)

# Guest root = host / (read-only); only build/$(PRESET)/rxe is shared writable.
# The guest's hard limit (vm-run.sh -t) bounds the whole tier, hang or not.
RXE_VM_ARGS ?= -t 1500
test-rxe: build
	$(MAKE) --no-print-directory rxe-tier

# An optimised dmbench too: the tier sets `micro access --backend ibv` beside
# perftest, and a sanitized build's overhead is not dmbench's.
rxe-tier: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS) --target dmbench
	tests/rxe/vm-run.sh -s $(CURDIR)/build/$(PRESET)/rxe $(RXE_VM_ARGS) -- \
	  $(CURDIR)/tests/rxe/guest-tier.sh $(CURDIR)/build/$(PRESET)

# What the runner needs (the rxe and cluster tiers ship it), and the scale checks.
tier-build: runner-build
	cmake --build --preset release -j $(JOBS) --target kv_scale_test

# Only what the runner needs, optimised (the figures' wall time is the simulator's).
runner-build: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS) --target dmbench dmb_micro

BACKEND ?=
INVENTORY ?=
FILTER ?=
PARAMS ?=
# BACKEND=...: the inventory is checked before anything is built.
cluster-args:
	@case "$(BACKEND)" in sim|ibv) ;; *) echo "BACKEND must be sim or ibv, got '$(BACKEND)'" >&2; exit 2;; esac
	@[ -n "$(INVENTORY)" ] && [ -f "$(INVENTORY)" ] || { echo "BACKEND=$(BACKEND) needs \
	INVENTORY=path/to/inventory.ini, an existing file (got '$(INVENTORY)'; see \
	ansible/inventory.example.ini)" >&2; exit 2; }

$(EXPERIMENTS): $(if $(BACKEND),cluster-args) runner-build
ifeq ($(BACKEND),)
	./build/release/cli/dmbench run experiments/$@.yaml --jobs $(JOBS) \
	  $(foreach p,$(PARAMS),--param $(p)) $(RUN_ARGS)
else
	cd ansible && ansible-playbook -i $(abspath $(INVENTORY)) site.yml $(ANSIBLE_ARGS)
	cd ansible && ansible-playbook -i $(abspath $(INVENTORY)) figure.yml -e figure=$@ \
	  -e backend=$(BACKEND) $(if $(FILTER),-e 'filter=$(FILTER)') \
	  $(if $(PARAMS),-e 'params=$(PARAMS)') $(ANSIBLE_ARGS)
endif
	/usr/bin/python3 plots/$@.py --results results/$@
	/usr/bin/python3 plots/results_readme.py --results results

figures: $(EXPERIMENTS)

# A figure with no spec: say which there are instead of make's "No rule".
figure-%:
	@echo "no experiments/$@.yaml; the experiments (make NAME) are: $(EXPERIMENTS)" >&2; exit 2

help:
	@sed -n '1,/^# Debian 12 packages/p' Makefile | sed '$$d' | sed 's/^# \{0,1\}//'
	@echo "Experiments (make NAME): $(EXPERIMENTS)"

calibrate: release
	./build/release/cli/dmbench calibrate

BENCH_ARGS ?=
BENCH_DIR := results/simulator-speed
bench: release
	mkdir -p $(BENCH_DIR)
	start=$$(date +%s.%N) && \
	./build/release/microbench/sim_speed_bench --benchmark_out_format=json \
	  --benchmark_out=$(BENCH_DIR)/simulator-speed.json $(BENCH_ARGS) && \
	/usr/bin/python3 plots/bench_meta.py --bench $(BENCH_DIR)/simulator-speed.json \
	  --build build/release --start $$start
	/usr/bin/python3 plots/simulator_speed.py --results $(BENCH_DIR)
	/usr/bin/python3 plots/results_readme.py --results results

format:
	find fabric systems harness microbench apps cli tests \( -name '*.h' -o -name '*.cc' \) -print0 | xargs -0 clang-format -i

format-check:
	find fabric systems harness microbench apps cli tests \( -name '*.h' -o -name '*.cc' \) -print0 | xargs -0 clang-format --dry-run --Werror

clean:
	rm -rf build
