# rlock: Redis-backed distributed locks (Redisson protocol) for PostgreSQL.
EXTENSION = rlock
MODULE_big = rlock
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c src/*/*.c)))
# The SQL scripts, one per version and one per upgrade (extension/).
DATA = $(wildcard extension/rlock--*.sql)
PGFILEDESC = "rlock - Redis-backed distributed locks"

# The version: rlock.control's default_version, which the library reports
# (rlock_version()) and META.json and debian/changelog repeat
# (test/check-package checks that they agree).
RLOCK_VERSION := $(shell sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" rlock.control)

SHLIB_LINK = -lhiredis
SHLIB_LINK += -lanl   # getaddrinfo_a: libanl before glibc 2.34, an empty stub since
SHLIB_LINK += -lssl -lcrypto   # TLS (transport_tls.c), digests (digest.c)
PG_CPPFLAGS = -I$(srcdir)/src
PG_CFLAGS = -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow=compatible-local \
	-Wno-missing-field-initializers -Wno-sign-compare

# Tests.  `make installcheck` runs the regress and isolation suites against
# the server running at PGHOST/PGPORT (the PGXS convention; doc/testing.md
# "Checking an installation" says what that server needs).  test/run
# instead starts a temporary instance per suite: it passes the config it
# wrote (its Redis's address) in RLOCK_TEST_CONF.  TAP tests start their own
# servers; only TAP_TESTS=1 runs them.
REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation
ifdef RLOCK_TEST_CONF
REGRESS_OPTS = --temp-instance=./tmp_check_regress --temp-config=$(RLOCK_TEST_CONF)
ISOLATION_OPTS += --temp-instance=./tmp_check_iso --temp-config=$(RLOCK_TEST_CONF)
else ifneq ($(strip $(REGRESS)$(ISOLATION)),)
REGRESS_PREP = installcheck-preflight
endif
PROVE_TESTS = $(sort $(wildcard test/t/*.pl))
PROVE_FLAGS = -I ./test/perl

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track headers: rebuild every object when one changes.
$(OBJS): $(wildcard src/*/*.h)

# rlock_version() (src/sql/introspect.c) is compiled from rlock.control.
src/sql/introspect.o src/sql/introspect.bc: override CPPFLAGS += -DRLOCK_VERSION='"$(RLOCK_VERSION)"'
src/sql/introspect.o src/sql/introspect.bc: rlock.control

# Before `make installcheck` against a running server: is rlock preloaded
# there, with the settings the suites need, and can redis-cli reach its
# Redis?  (Says what is missing instead of a page of diffs.)
.PHONY: installcheck-preflight
installcheck-preflight:
	@bash test/installcheck-preflight '$(bindir)' '$(RLOCK_VERSION)'

# The archive PGXN takes: rlock-<version>.zip of the committed HEAD.
.PHONY: dist
dist:
	git archive --format=zip --prefix=rlock-$(RLOCK_VERSION)/ -o rlock-$(RLOCK_VERSION).zip HEAD
	@echo "dist: rlock-$(RLOCK_VERSION).zip (git HEAD $$(git rev-parse --short HEAD))"

.PHONY: test demo bench
test:
	bash test/run
demo:
	bash scripts/demo
bench:
	bash bench/run
