/* page.c: the page for a person, built into the binary (the files of serve/page: no
 * fonts, scripts or styles from anywhere else), with a content security
 * policy that lets it load only its own files and talk only to its own
 * server. */
#include <string.h>

#include "serve/serve_int.h"

/* The files, assembled into read-only data (the Makefile makes page.o
 * depend on them). */
#define EMBED(sym, file)                                           \
    __asm__(".section .rodata\n"                                   \
            ".balign 16\n"                                         \
            ".global " #sym "\n" #sym ":\n"                        \
            ".incbin \"serve/page/" file "\"\n"                    \
            ".global " #sym "_end\n" #sym "_end:\n"                \
            ".previous\n");                                        \
    extern const char sym[], sym##_end[]
EMBED(hx_sv_page_index, "index.html");
EMBED(hx_sv_page_app, "app.js");
EMBED(hx_sv_page_style, "style.css");
EMBED(hx_sv_page_icon, "icon.svg");

typedef struct file {
    const char *path, *type;
    const char *data, *end;
} file;

static const file files[] = {
    {"/", "text/html; charset=utf-8", hx_sv_page_index, hx_sv_page_index_end},
    {"/index.html", "text/html; charset=utf-8", hx_sv_page_index, hx_sv_page_index_end},
    {"/app.js", "text/javascript; charset=utf-8", hx_sv_page_app, hx_sv_page_app_end},
    {"/style.css", "text/css; charset=utf-8", hx_sv_page_style, hx_sv_page_style_end},
    {"/icon.svg", "image/svg+xml", hx_sv_page_icon, hx_sv_page_icon_end},
};

#define PAGE_CSP                                                                       \
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "    \
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

enum MHD_Result hx_sv_page(sv_req *r)
{
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        const file *f = &files[i];
        if (strcmp(r->url, f->path)) continue;
        struct MHD_Response *res = MHD_create_response_from_buffer(
            (size_t)(f->end - f->data), (void *)f->data, MHD_RESPMEM_PERSISTENT);
        if (!res) return MHD_NO;
        MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, f->type);
        MHD_add_response_header(res, "Content-Security-Policy", PAGE_CSP);
        hx_sv_common_headers(res);
        enum MHD_Result ok = MHD_queue_response(r->conn, MHD_HTTP_OK, res);
        MHD_destroy_response(res);
        return ok;
    }
    return hx_sv_error(r->conn, 404, NULL, "unknown_url", "no such page: %.100s", r->url);
}
