/*-------------------------------------------------------------------------
 *
 * histograms.c
 *	  rlock_stats_histograms(): the wait and hold times of this server's
 *	  lock calls, per lock kind, as cumulative buckets in Prometheus's "le"
 *	  convention, so that an SQL exporter can serve them as they are.
 *
 * One row per kind, measure and bucket, a fixed number of rows (never one
 * per lock name): count is the observations at most le seconds (the +Inf
 * bucket's: all of them), sum the total seconds of that kind and measure,
 * the same on each of its rows.  The counts live in stats.c's per-process
 * slots; this file only reads and accumulates them.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/float.h"

#include "holds/holds.h"
#include "base/base.h"
#include "sql/sql.h"

static const char *const measure_names[RLOCK_NUM_MEASURES] = {
	[RLOCK_MEASURE_WAIT] = "wait",
	[RLOCK_MEASURE_HOLD] = "hold",
};

PG_FUNCTION_INFO_V1(rlock_stats_histograms);
Datum
rlock_stats_histograms(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	uint64		cells[RLOCK_NUM_CELLS];
	TimestampTz reset_at;

	registry_require("rlock_stats_histograms");
	InitMaterializedSRF(fcinfo, 0);
	stats_read_cells(cells, &reset_at);

	for (int k = 0; k < RLOCK_HIST_KINDS; k++)
	{
		for (int m = 0; m < RLOCK_NUM_MEASURES; m++)
		{
			int			cell = stats_hist_cell(k, m);
			double		sum = (double) cells[cell + RLOCK_HIST_SUM] / 1e6;
			int64		cumulative = 0;

			if (!stats_hist_has(k, (RlockMeasure) m))
				continue;
			for (int b = 0; b < RLOCK_HIST_BUCKETS; b++)
			{
				Datum		vals[5];
				bool		nulls[5] = {0};
				int64		bound = stats_hist_bound_us(b);

				cumulative += (int64) cells[cell + b];
				vals[0] = CStringGetTextDatum(stats_hist_kind_name(k));
				vals[1] = CStringGetTextDatum(measure_names[m]);
				vals[2] = Float8GetDatum(bound < 0 ? get_float8_infinity() :
										 (double) bound / 1e6);
				vals[3] = Int64GetDatum(cumulative);
				vals[4] = Float8GetDatum(sum);
				tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc,
									 vals, nulls);
			}
		}
	}
	return (Datum) 0;
}
