/*
 * fuzz_snapshot.c - libFuzzer target for the snapshot reader (snapshot_parse).
 *
 * The first input byte picks a mode; the rest is the payload:
 *
 *   bit 0 clear  the payload is a whole file, parsed as is (an exact-size heap copy, so ASan
 *                catches any over-read). Almost every mutation fails the CRC.
 *   bit 0 set    the payload is a body: the harness puts a valid header before it (the format
 *                version 1, 2 or 3 by bits 1-2 of the first byte) and a correct CRC-32C after
 *                it, so the structural checks (tags, lengths, rules, counts, states) are what
 *                decides, and the visiting pass runs whenever they pass.
 *
 * Checks what must hold for any input: a result of LOADED or CORRUPT only; CORRUPT visits
 * nothing and says why; on LOADED every id and key lies inside the input, every state handed
 * out is a state of its section's rule in the length it is given with (sl_state_check_len),
 * every section comes before its entries, every rule handed out is prepared (state_size
 * matches), and the same bytes parse the same way twice.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/snapshot.h"

#define HEADER_SIZE 24

typedef struct visit {
    const uint8_t *lo, *hi; /* the input's bytes */
    size_t sections, entries;
    size_t state_size; /* of the current section; 0 before the first */
    sl_rule_t rule;    /* of the current section */
    uint64_t hash;     /* of everything visited, to compare two parses */
} visit_t;

static void inside(const visit_t *v, const void *p, size_t len)
{
    const uint8_t *b = p;
    if (len > 0 && (b < v->lo || b + len > v->hi))
        abort();
}

static void mix(visit_t *v, const void *p, size_t len)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        v->hash = (v->hash ^ b[i]) * 0x100000001b3u;
}

static bool on_section(void *arg, const void *id, size_t id_len, const sl_rule_t *rule,
                       const snapshot_closed_t *closed)
{
    visit_t *v = arg;
    inside(v, id, id_len);
    sl_rule_t again = *rule;
    if (sl_rule_prepare(&again) != SL_OK || again.state_size != rule->state_size ||
        sl_state_size(rule) == 0 || closed->until_ns < closed->from_ns)
        abort();
    v->sections++;
    v->state_size = sl_state_size(rule);
    v->rule = *rule;
    mix(v, id, id_len);
    mix(v, &rule->state_size, sizeof(rule->state_size));
    return (id_len & 1) == 0; /* skip some sections' entries, as sluiced does for unknown rules */
}

static void on_entry(void *arg, const void *key, size_t key_len, const void *state,
                     size_t state_len)
{
    visit_t *v = arg;
    if (v->sections == 0 || v->state_size == 0 || state_len > v->state_size ||
        sl_state_check_len(&v->rule, state, state_len) != SL_OK)
        abort();
    inside(v, key, key_len);
    v->entries++;
    mix(v, key, key_len);
    mix(v, state, state_len);
}

static uint32_t crc32c(const uint8_t *p, size_t n)
{
    static uint32_t table[256];
    if (table[1] == 0) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
            table[i] = c;
        }
    }
    uint32_t c = 0xffffffffu;
    while (n--)
        c = (c >> 8) ^ table[(c ^ *p++) & 0xff];
    return ~c;
}

static int parse(const uint8_t *buf, size_t len, visit_t *v, int64_t *written)
{
    *v = (visit_t){.lo = buf, .hi = buf + len, .hash = 0xcbf29ce484222325u};
    snapshot_visitor_t visitor = {.section = on_section, .entry = on_entry, .arg = v};
    char err[SNAPSHOT_ERR_MAX];
    err[0] = '\0';
    int rc = snapshot_parse(buf, len, &visitor, written, err);
    if (rc == SNAPSHOT_CORRUPT && (v->sections != 0 || v->entries != 0 || err[0] == '\0'))
        abort();
    if (rc != SNAPSHOT_CORRUPT && rc != SNAPSHOT_LOADED)
        abort();
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    bool framed = data[0] & 1;
    uint8_t version = (uint8_t)(1 + (data[0] >> 1 & 3) % 3);
    data++;
    size--;
    size_t len = framed ? HEADER_SIZE + size + 4 : size;
    uint8_t *buf = malloc(len ? len : 1);
    if (framed) {
        static const uint8_t header[HEADER_SIZE] = {'S', 'L', 'U', 'I', 'C', 'E', 'S', 'N', 1};
        memcpy(buf, header, HEADER_SIZE);
        buf[8] = version;
        memcpy(buf + HEADER_SIZE, data, size);
        uint32_t crc = crc32c(buf, len - 4);
        for (int i = 0; i < 4; i++)
            buf[len - 4 + i] = (uint8_t)(crc >> (8 * i));
    } else {
        memcpy(buf, data, size);
    }
    visit_t first, second;
    int64_t written = -1;
    int rc = parse(buf, len, &first, &written);
    if (rc == SNAPSHOT_LOADED) {
        if (framed && written != 0)
            abort();
        if (parse(buf, len, &second, &written) != rc || second.hash != first.hash ||
            second.sections != first.sections || second.entries != first.entries)
            abort();
    }
    free(buf);
    return 0;
}
