/*-------------------------------------------------------------------------
 *
 * waitqueue.h
 *	  Which of this server's sessions waiting for one lock tries next.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_WAITQUEUE_H
#define RLOCK_WAITQUEUE_H

extern void waitqueue_install_hooks(void);

extern void waitqueue_join(const char *channel);
extern bool waitqueue_is_first(void);
extern void waitqueue_leave(bool pass_on);

#endif							/* RLOCK_WAITQUEUE_H */
