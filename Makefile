# rlock: Redis-backed distributed locks (Redisson protocol) for PostgreSQL.
EXTENSION = rlock
MODULE_big = rlock
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c src/*/*.c)))
DATA = $(wildcard rlock--*.sql)
PGFILEDESC = "rlock - Redis-backed distributed locks"

SHLIB_LINK = -lhiredis
SHLIB_LINK += -lanl   # getaddrinfo_a: libanl before glibc 2.34, an empty stub since
SHLIB_LINK += -lssl -lcrypto   # TLS (transport_tls.c), digests (digest.c)
PG_CPPFLAGS = -I$(srcdir)/src
PG_CFLAGS = -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter \
	-Wno-missing-field-initializers -Wno-sign-compare

# Tests.  test/run starts the Redis the regress and isolation suites use and
# writes its address into $(RLOCK_TEST_CONF); TAP tests start their own.
RLOCK_TEST_CONF ?= ./test/regress.conf
REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --temp-instance=./tmp_check_regress --temp-config=$(RLOCK_TEST_CONF)
ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation --temp-instance=./tmp_check_iso \
	--temp-config=$(RLOCK_TEST_CONF)
TAP_TESTS = 1
PROVE_TESTS = $(sort $(wildcard test/t/*.pl))
PROVE_FLAGS = -I ./test/perl

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track headers: rebuild every object when one changes.
$(OBJS): $(wildcard src/*/*.h)

.PHONY: test demo bench
test:
	bash test/run
demo:
	bash scripts/demo
bench:
	bash bench/run
