-- Read/write locks (SPEC.md 5.2, Redisson RReadWriteLock): many readers or
-- one writer; a writer may also read; a reader cannot upgrade.  Other
-- holders are played by owner tokens.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS rlock;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT current_setting('rlock.redis_url') AS redis_url \gset
\setenv RLOCK_REDIS_URL :redis_url

-- readers share
SELECT rlock_read_acquire('rw_a', '1 minute');
SELECT rlock_read_try_acquire('rw_a', '1 minute', owner => 'reader2') AS second_reader;
SELECT rlock_read_acquire('rw_a', '1 minute');   -- reentrant
SELECT rlock_hold_count('rw_a'), rlock_is_held('rw_a'), rlock_is_locked('rw_a');
SELECT kind, holder = rlock_holder_id() AS mine, hold_count
  FROM rlock_status('rw_a') ORDER BY mine DESC;
SELECT kind, scope, hold_count FROM rlock_locks WHERE name = 'rw_a';
\! redis-cli -u "$RLOCK_REDIS_URL" HGET rw_a mode
-- one timeout key per read hold
\! redis-cli -u "$RLOCK_REDIS_URL" --scan --pattern '{rw_a}:*:rwlock_timeout:*' | wc -l

-- ... and exclude writers
SELECT rlock_write_try_acquire('rw_a', '1 minute', owner => 'writer') AS writer_while_read;
SELECT rlock_write_try_acquire('rw_a', '1 minute', wait => '100 ms', owner => 'writer') AS writer_after_wait;

-- a reader asking for the write lock gets an ERROR, not a wait for itself
SELECT rlock_write_acquire('rw_a', '1 minute');
SELECT rlock_write_try_acquire('rw_a', '1 minute', owner => 'reader2');

-- releases: the last reader frees the lock for a writer
SELECT rlock_read_release('rw_a'), rlock_read_release('rw_a');
SELECT rlock_read_release('rw_a');
SELECT rlock_write_try_acquire('rw_a', '1 minute', owner => 'writer') AS writer_while_reader2;
SELECT rlock_read_release('rw_a', owner => 'reader2');
SELECT rlock_is_locked('rw_a');
\! redis-cli -u "$RLOCK_REDIS_URL" --scan --pattern '{rw_a}:*:rwlock_timeout:*' | wc -l

-- a writer excludes readers and other writers
SELECT rlock_write_acquire('rw_a', '1 minute', owner => 'writer');
SELECT rlock_read_try_acquire('rw_a', '1 minute') AS reader_while_written;
SELECT rlock_write_try_acquire('rw_a', '1 minute') AS writer_while_written;
SELECT rlock_write_release('rw_a', owner => 'writer');

-- a writer may also read (downgrade): after its write release the lock is
-- still its, in read mode, and other readers may join
SELECT rlock_write_acquire('rw_b', '1 minute');
SELECT rlock_write_acquire('rw_b', '1 minute');
SELECT rlock_read_acquire('rw_b', '1 minute');
SELECT kind, hold_count FROM rlock_status('rw_b') ORDER BY kind;
SELECT rlock_read_try_acquire('rw_b', '1 minute', owner => 'reader2') AS reader_while_written;
SELECT rlock_write_release('rw_b'), rlock_write_release('rw_b');
\! redis-cli -u "$RLOCK_REDIS_URL" HGET rw_b mode
SELECT rlock_read_try_acquire('rw_b', '1 minute', owner => 'reader2') AS reader_after_downgrade;
SELECT rlock_write_try_acquire('rw_b', '1 minute', owner => 'writer') AS writer_after_downgrade;
SELECT rlock_read_release('rw_b'), rlock_read_release('rw_b', owner => 'reader2');
SELECT rlock_is_locked('rw_b');

-- releasing the wrong side, or what is not held
SELECT rlock_read_acquire('rw_c', '1 minute');
SELECT rlock_write_release('rw_c');
SELECT rlock_release('rw_c');
SELECT rlock_read_release('rw_c');
SELECT rlock_read_release('rw_c');

-- transaction-level read and write locks end with the transaction
BEGIN;
SELECT rlock_write_xact_acquire('rw_x', '1 minute');
SELECT rlock_read_xact_try_acquire('rw_x', '1 minute') AS xact_read_too;
SELECT rlock_hold_count('rw_x');
SELECT rlock_write_release('rw_x');
COMMIT;
SELECT rlock_is_locked('rw_x');
BEGIN;
SELECT rlock_read_xact_acquire('rw_x', '1 minute');
SAVEPOINT s;
SELECT rlock_read_xact_acquire('rw_x', '1 minute');
ROLLBACK TO s;
SELECT rlock_hold_count('rw_x');
ROLLBACK;
SELECT rlock_is_locked('rw_x');

-- rlock_release_all releases both sides, and counts the names (2)
SELECT rlock_write_acquire('rw_d', '1 minute'), rlock_read_acquire('rw_d', '1 minute');
SELECT rlock_acquire('rw_e', '1 minute');
SELECT rlock_release_all();
SELECT rlock_is_locked('rw_d'), rlock_is_locked('rw_e');

-- one name, two kinds: refused on both sides, never a silent break
SELECT rlock_acquire('rw_kind', '1 minute', owner => 'someone');
SELECT rlock_read_try_acquire('rw_kind', '1 minute');
SELECT rlock_write_try_acquire('rw_kind', '1 minute');
SELECT rlock_release('rw_kind', owner => 'someone');
SELECT rlock_read_acquire('rw_kind', '1 minute', owner => 'someone');
SELECT rlock_try_acquire('rw_kind', '1 minute');
SELECT rlock_fenced_try_acquire('rw_kind', '1 minute');
SELECT rlock_read_release('rw_kind', owner => 'someone');
-- ... also within this session, without asking Redis
SELECT rlock_acquire('rw_mine', '1 minute');
SELECT rlock_read_acquire('rw_mine', '1 minute');
SELECT rlock_read_release('rw_mine');
SELECT rlock_release('rw_mine');
SELECT rlock_read_acquire('rw_mine', '1 minute');
SELECT rlock_acquire('rw_mine', '1 minute');
SELECT rlock_release('rw_mine');
SELECT rlock_read_release('rw_mine');

-- a read hold's lease is its own timeout key; the lock lives as long as
-- the longest of them
SELECT rlock_read_acquire('rw_t', '1 minute');
SELECT rlock_read_acquire('rw_t', '2 minutes', owner => 'reader2');
SELECT rlock_remaining_lease('rw_t') > '1 minute' AS longest_lease;
SELECT rlock_read_release('rw_t', owner => 'reader2');
SELECT rlock_remaining_lease('rw_t') <= '1 minute' AS back_to_the_remaining_one;
SELECT rlock_read_release('rw_t');

-- argument checks as for the exclusive lock
SELECT rlock_read_acquire(NULL);
SELECT rlock_write_try_acquire('rw_a', '0 s');
SELECT rlock_read_try_acquire('rw_a', '1 minute', NULL);
SELECT rlock_write_acquire('rw_a', NULL, owner => 'writer');
