/* fuzz_mail.c: fuzz target for the mail parser (RFC 5322, MIME, RFC 2047,
 * charsets, HTML to text): any bytes must parse without crash or overread,
 * and every string of the result must be valid UTF-8; the address lists
 * of its headers split into addresses with one '@' and no blank (what
 * hx_tools_known_addresses takes from them). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/mail_int.h"
#include "tools/tools_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_utf8(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        int k = *u < 0x80 ? 1 : (*u & 0xe0) == 0xc0 ? 2 : (*u & 0xf0) == 0xe0 ? 3
                : (*u & 0xf8) == 0xf0 ? 4 : 0;
        if (!k) abort();
        for (int i = 1; i < k; i++)
            if ((u[i] & 0xc0) != 0x80) abort();
        u += k;
    }
}

static void check_addresses(const char *s)
{
    char piece[512], email[256];
    while (s && hx_address_list_next(&s, piece, sizeof piece)) {
        if (strlen(piece) >= sizeof piece) abort();
        if (hx_parse_address(piece, NULL, 0, email, sizeof email)) continue;
        const char *at = strchr(email, '@');
        if (!at || strchr(at + 1, '@') || strchr(email, ' ')) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    hx_message *m = NULL;
    hx_err e;
    if (hx_message_parse((const char *)data, size, &m, &e) != HX_OK) return 0;
    check_utf8(m->subject);
    check_utf8(m->from);
    check_utf8(m->text);
    for (int i = 0; i < m->n_att; i++) check_utf8(m->att[i].filename);
    check_addresses(m->from);
    check_addresses(m->to);
    check_addresses(m->cc);
    hx_message_free(m);
    char *h = hx_mail_decode_header((const char *)data, size);
    check_utf8(h);
    free(h);
    char *t = hx_mail_html_to_text((const char *)data, size);
    check_utf8(t);
    free(t);
    return 0;
}
