-- bench/deadlock_report.sql -- the deadlock section's rows of the table
-- (bench/deadlock.sh), read by bench/report.sql before it prints the table.
-- The floor column holds the same run with detection off; the best round
-- of each counts (what else runs on the machine only ever takes from a
-- run).  Round trips per pair are rlock_stats' deltas over all rounds: the
-- bench's own statements between the runs add a few thousandths.

CREATE TEMP VIEW deadlock_best AS
  SELECT script, clients, mode, max(tps) AS tps, min(latency_ms) AS latency_ms,
         sum(round_trips)::float8 / nullif(sum(xacts), 0) AS round_trips,
         string_agg(round(tps)::text, ', ' ORDER BY round) AS rounds
  FROM deadlock_run GROUP BY script, clients, mode;

CREATE TEMP VIEW deadlock_pct AS
  SELECT count(*) AS n,
         percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50,
         percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99,
         max(ms) AS max
  FROM deadlock_ms HAVING count(*) > 0;

INSERT INTO report (section, measure, unit, rlock, floor, target, met)
SELECT CASE WHEN n.script = 'rlock' THEN 'deadlock detection, 1 client'
            ELSE format('deadlock detection, %s sessions on one name', n.clients) END,
       CASE WHEN n.script = 'rlock'
            THEN 'try+release: throughput, on (floor: off)'
            ELSE 'acquire+release: throughput, on (floor: off)' END,
       'pairs/s', n.tps, f.tps, '>= 0.95 x off', n.tps >= 0.95 * f.tps
FROM deadlock_best n
JOIN deadlock_best f ON f.script = n.script AND f.clients = n.clients
                    AND f.mode = 'off'
WHERE n.mode = 'on'
ORDER BY n.clients;

INSERT INTO report (section, measure, unit, rlock, floor, target, met)
SELECT 'deadlock detection, 1 client',
       'Redis round trips per try+release, on (floor: off)', 'n',
       n.round_trips, f.round_trips, '<= off (+ 0.01)',
       n.round_trips <= f.round_trips + 0.01
FROM deadlock_best n
JOIN deadlock_best f ON f.script = n.script AND f.clients = n.clients
                    AND f.mode = 'off'
WHERE n.mode = 'on' AND n.script = 'rlock';

-- The cycle closing -> the victim's 40P01; floor: deadlock_timeout plus
-- two Redis round trips (rlock_ping's median).
INSERT INTO report (section, measure, unit, rlock, floor, target, met)
SELECT format('deadlock found (%s cycles)', p.n), m.measure, 'ms', m.v,
       b.deadlock_timeout_ms + 2 * b.round_trip_ms, m.target, m.met
FROM deadlock_pct p CROSS JOIN deadlock_basis b
CROSS JOIN LATERAL (VALUES
  (1, 'p50', p.p50, '<= deadlock_timeout + 2 round trips',
   p.p50 <= b.deadlock_timeout_ms + 2 * b.round_trip_ms),
  (2, 'p99', p.p99, NULL, NULL),
  (3, 'max', p.max, NULL, NULL)) m(o, measure, v, target, met)
ORDER BY m.o;
