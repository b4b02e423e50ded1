/*-------------------------------------------------------------------------
 *
 * registry.h
 *	  rlock's shared memory: the instance identity.
 *
 * Copyright (c) 2026, rlock developers
 *
 *-------------------------------------------------------------------------
 */
#ifndef RLOCK_REGISTRY_H
#define RLOCK_REGISTRY_H

extern void registry_install_hooks(void);
extern bool registry_available(void);
extern const char *rlock_backend_holder(void);

#endif							/* RLOCK_REGISTRY_H */
