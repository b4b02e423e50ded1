/*-------------------------------------------------------------------------
 *
 * holds_lost.c
 *	  The transaction-level holds this transaction lost, remembered until
 *	  it ends, so that its COMMIT fails even when an earlier call already
 *	  reported the loss and forgot the lock.
 *
 * A lock found lost is forgotten at once, every hold of it, with a WARNING
 * (holds_table.c): a release, a re-acquisition, a rollback to a savepoint
 * or a refused renewal may be the call that finds out.  If the lock had
 * transaction-level holds, the writes it guarded must not commit: the
 * check before COMMIT (holds_commit.c) would find nothing left to check,
 * so the loss is noted here, with the outermost (sub)transaction whose
 * holds were lost.  Rolling back to before that subtransaction takes the
 * note away with those holds; committing it hands the note to its parent,
 * as the holds themselves (holds_xact.c); the end of the transaction
 * clears every note.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "holds/holds.h"
#include "holds/holds_int.h"

typedef struct LostXact
{
	SubTransactionId subid;		/* outermost (sub)transaction that held it */
	char	   *key;			/* in TopMemoryContext */
	RlockKind	kind;
} LostXact;

#define MAX_LOST_NOTES 16

static LostXact lost[MAX_LOST_NOTES];
static int	nlost = 0;

/*
 * h is being forgotten as lost: note it if this transaction held it at
 * transaction level.  (Past MAX_LOST_NOTES notes, the last one is replaced
 * by one for the top-level transaction: its COMMIT fails whatever is
 * rolled back later, which errs on the safe side.)
 */
void
holds_note_lost_xact(const HeldLock *h)
{
	SubTransactionId subid;

	if (h->xact_count == 0 || h->nxact == 0)
		return;
	subid = h->xact[0].subid;
	if (nlost == MAX_LOST_NOTES)
	{
		nlost--;
		subid = TopSubTransactionId;
		pfree(lost[nlost].key);
	}
	lost[nlost].subid = subid;
	lost[nlost].key = MemoryContextStrdup(TopMemoryContext, h->key);
	lost[nlost].kind = h->kind;
	nlost++;
}

/*
 * A subtransaction ended: rolled back, its notes go (the holds they are
 * about were its own); committed, they pass to its parent.
 */
void
holds_lost_xact_subxact_end(SubTransactionId subid, SubTransactionId parent,
							bool committed)
{
	int			kept = 0;

	for (int i = 0; i < nlost; i++)
	{
		if (lost[i].subid == subid)
		{
			if (!committed)
			{
				pfree(lost[i].key);
				continue;
			}
			lost[i].subid = parent;
		}
		lost[kept++] = lost[i];
	}
	nlost = kept;
}

/* The transaction ended: no note outlives it. */
void
holds_lost_xact_reset(void)
{
	for (int i = 0; i < nlost; i++)
		pfree(lost[i].key);
	nlost = 0;
}

/*
 * The key of a lock this transaction lost at transaction level (and its
 * kind in *kind), or NULL.
 */
const char *
holds_lost_xact_key(RlockKind *kind)
{
	if (nlost == 0)
		return NULL;
	*kind = lost[0].kind;
	return lost[0].key;
}
