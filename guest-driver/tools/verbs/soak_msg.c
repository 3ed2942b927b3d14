// SPDX-License-Identifier: GPL-2.0
/*
 * ibtca-verbs soak's messages: each one's length and the pattern of its
 * bytes, both derived from (run nonce, sender, receiver, k) (soak.h).
 */
#include <string.h>

#include "soak.h"

uint64_t sk_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t sk_next(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ULL;
	return sk_mix(*state);
}

/* Message lengths: 40 % up to 64 B, 30 % to 2 KiB, 20 % to 8 KiB, 10 %
 * to 32 KiB (up to 16 packets at MTU 2048).
 */
uint32_t sk_len(uint16_t from, uint16_t to, uint64_t k)
{
	uint64_t h = sk_mix(((uint64_t)from << 48) ^ ((uint64_t)to << 32) ^ k);
	uint32_t r = (uint32_t)(h % 100), x = (uint32_t)(h >> 32);

	if (r < 40)
		return 1 + x % 64;
	if (r < 70)
		return 65 + x % (2048 - 64);
	if (r < 90)
		return 2049 + x % (8192 - 2048);
	return 8193 + x % (SK_SLOT_LEN - 8192);
}

uint64_t sk_seed(uint64_t nonce, uint16_t from, uint16_t to,
		 uint64_t k)
{
	return sk_mix(nonce ^ sk_mix(((uint64_t)from << 48) ^
				     ((uint64_t)to << 32) ^ k));
}

void sk_fill(uint8_t *p, uint32_t len, uint64_t seed)
{
	uint64_t w;
	uint32_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		w = sk_next(&seed);
		memcpy(p + i, &w, 8);
	}
	if (i < len) {
		w = sk_next(&seed);
		memcpy(p + i, &w, len - i);
	}
}

/* Offset of the first byte that differs from sk_fill's, or @len. */
uint32_t sk_diff(const uint8_t *p, uint32_t len, uint64_t seed)
{
	uint64_t w;
	uint32_t i, j;

	for (i = 0; i < len; i += 8) {
		uint32_t n = len - i < 8 ? len - i : 8;

		w = sk_next(&seed);
		if (!memcmp(p + i, &w, n))
			continue;
		for (j = 0; j < n; j++)
			if (p[i + j] != ((uint8_t *)&w)[j])
				return i + j;
	}
	return len;
}
