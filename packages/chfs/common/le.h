/*
 * le.h — little-endian integers of 1..8 bytes in byte buffers: the wire format (wire.c), the
 * record codec, the namespace journal and the backend relink log all store them this way.
 */
#ifndef CHFS_LE_H
#define CHFS_LE_H

#include <stdint.h>

static inline void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

#endif
